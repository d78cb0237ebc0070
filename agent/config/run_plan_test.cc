#include "agent/config/run_plan.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(RunPlanTest, OneNodeIsInProcessAndOpensTheStore) {
  Config c;
  RunPlan plan = ResolveRunPlan(c);
  EXPECT_EQ(plan.rendezvous.backend, rdzv::Backend::kInProcess);
  EXPECT_TRUE(plan.rendezvous.opens_store);
  EXPECT_FALSE(plan.rendezvous.hosts_here);
  EXPECT_EQ(plan.run_id, "none");
}

TEST(RunPlanTest, StandaloneWithoutAnIdGetsAFreshOne) {
  Config c;
  c.standalone = true;
  RunPlan a = ResolveRunPlan(c);
  RunPlan b = ResolveRunPlan(c);
  EXPECT_NE(a.run_id, "none");
  EXPECT_EQ(a.run_id.size(), 36u) << a.run_id;  // a UUID
  EXPECT_NE(a.run_id, b.run_id);
  EXPECT_EQ(a.config.run_id, "none");  // the flag stays as given
  c.run_id = "given";
  EXPECT_EQ(ResolveRunPlan(c).run_id, "given");
}

TEST(RunPlanTest, AnEndpointThatNamesThisHostIsServedHereUnlessToldNot) {
  Config c;
  c.min_nodes = c.max_nodes = 2;
  c.rdzv_host_name = "127.0.0.1";
  c.rdzv_port = 29400;
  RunPlan plan = ResolveRunPlan(c);
  EXPECT_EQ(plan.rendezvous.backend, rdzv::Backend::kGrpc);
  EXPECT_EQ(plan.rendezvous.endpoint.host, "127.0.0.1");
  EXPECT_EQ(plan.rendezvous.endpoint.port, 29400);
  EXPECT_TRUE(plan.rendezvous.endpoint_is_this_host);
  EXPECT_TRUE(plan.rendezvous.hosts_here);

  c.rdzv_hosting = RdzvHosting::kNever;
  plan = ResolveRunPlan(c);
  EXPECT_TRUE(plan.rendezvous.endpoint_is_this_host);
  EXPECT_FALSE(plan.rendezvous.hosts_here);

  c.rdzv_host_name = "192.0.2.1";  // TEST-NET-1: no host's
  c.rdzv_hosting = RdzvHosting::kAuto;
  plan = ResolveRunPlan(c);
  EXPECT_FALSE(plan.rendezvous.endpoint_is_this_host);
  EXPECT_FALSE(plan.rendezvous.hosts_here);
  c.rdzv_hosting = RdzvHosting::kAlways;
  EXPECT_TRUE(ResolveRunPlan(c).rendezvous.hosts_here);
}

TEST(RunPlanTest, EtcdIsNeverServedHere) {
  Config c;
  c.min_nodes = c.max_nodes = 2;
  c.rdzv_backend = rdzv::Backend::kEtcd;
  c.rdzv_host_name = "127.0.0.1";
  c.rdzv_port = 2379;
  c.rdzv_endpoints = {{.host = "127.0.0.1", .port = 2379}, {.host = "e2", .port = 2380}};
  RunPlan plan = ResolveRunPlan(c);
  EXPECT_EQ(plan.rendezvous.backend, rdzv::Backend::kEtcd);
  ASSERT_EQ(plan.rendezvous.etcd_members.size(), 2u);
  EXPECT_EQ(plan.rendezvous.etcd_members[1].ToString(), "e2:2380");
  EXPECT_FALSE(plan.rendezvous.hosts_here);
  EXPECT_FALSE(plan.rendezvous.endpoint_is_this_host);
  EXPECT_TRUE(plan.rendezvous.opens_store);
}

TEST(RunPlanTest, ANodeRankAboveZeroOfAFixedSizeNeverOpensTheStore) {
  Config c;
  c.min_nodes = c.max_nodes = 2;
  c.rdzv_host_name = "192.0.2.1";
  c.node_rank = 1;
  EXPECT_FALSE(ResolveRunPlan(c).rendezvous.opens_store);
  c.store = StoreOwner::kRank0;
  c.node_rank = 0;
  EXPECT_FALSE(ResolveRunPlan(c).rendezvous.opens_store);
}

// Moved from the backends' test when the hosting decision moved into the plan: the
// backend objects read RendezvousPlan::hosts_here and decide it no more.
TEST(RunPlanTest, OnlyMustersOwnRendezvousIsHostedByAnAgent) {
  Config c;
  c.min_nodes = c.max_nodes = 2;
  c.rdzv_host_name = "elsewhere.invalid";
  c.rdzv_hosting = RdzvHosting::kAlways;
  EXPECT_TRUE(ResolveRunPlan(c).rendezvous.hosts_here);
  c.rdzv_backend = rdzv::Backend::kEtcd;
  EXPECT_FALSE(ResolveRunPlan(c).rendezvous.hosts_here);
  c.rdzv_backend = rdzv::Backend::kInProcess;
  EXPECT_FALSE(ResolveRunPlan(c).rendezvous.hosts_here);
  c.rdzv_backend = rdzv::Backend::kGrpc;
  c.rdzv_hosting = RdzvHosting::kNever;
  EXPECT_FALSE(ResolveRunPlan(c).rendezvous.hosts_here);
  c.rdzv_hosting = RdzvHosting::kAuto;
  EXPECT_FALSE(ResolveRunPlan(c).rendezvous.hosts_here);  // the endpoint names another machine
  c.rdzv_host_name = "127.0.0.1";
  EXPECT_TRUE(ResolveRunPlan(c).rendezvous.hosts_here);
}

// -r/-t/--local-ranks-filter/--log-dir become one route per local rank of the worker plan;
// the run directory keeps stream files when some -r/-t value is not 0.
TEST(RunPlanTest, OutputIsRoutedOncePerLocalRank) {
  Config c;
  RunPlan plan = ResolveRunPlan(c, {.nproc = 3});
  ASSERT_EQ(plan.output.ranks.size(), 3u);
  EXPECT_FALSE(plan.output.ranks[2].out.to_file);
  EXPECT_TRUE(plan.output.ranks[2].err.to_console);
  EXPECT_FALSE(plan.output.stream_files);
  c.redirects.by_rank[StreamSelection::kAllRanks] = 0;  // -r 0: nothing to files
  EXPECT_FALSE(ResolveRunPlan(c, {.nproc = 3}).output.stream_files);
  c.tee.by_rank[1] = 2;  // -t 1:2
  c.local_ranks_filter = {1};
  plan = ResolveRunPlan(c, {.nproc = 3});
  EXPECT_TRUE(plan.output.stream_files);
  EXPECT_TRUE(plan.output.ranks[1].err.to_file);
  EXPECT_TRUE(plan.output.ranks[1].err.to_console);
  EXPECT_FALSE(plan.output.ranks[1].out.to_file);
  EXPECT_FALSE(plan.output.ranks[0].err.to_console);  // filtered out
  c.log_dir = "/logs";                                // every stream to a file
  EXPECT_TRUE(ResolveRunPlan(c, {.nproc = 3}).output.ranks[0].out.to_file);
}

}  // namespace
}  // namespace muster

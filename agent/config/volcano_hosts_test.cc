#include "agent/config/volcano_hosts.h"

#include <filesystem>
#include <fstream>
#include <string>

#include "agent/config/run_flags.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

const std::map<std::string, std::string> kSvcEnv = {
    {"VC_WORKER_HOSTS", "vc-worker-0.vc,vc-worker-1.vc"},
    {"VC_WORKER_NUM", "2"},
    {"VC_MASTER_HOSTS", "vc-master-0.vc"},
    {"VC_MASTER_NUM", "1"},
    {"VC_TASK_INDEX", "1"}};

TEST(VolcanoHostsTest, MasterTaskFirstThenTasksByName) {
  std::map<std::string, std::string> env = kSvcEnv;
  env["VC_AUX_HOSTS"] = "vc-aux-0.vc";
  EXPECT_EQ(VolcanoHosts(env, "/nonexistent"),
            (std::vector<std::string>{"vc-master-0.vc", "vc-aux-0.vc", "vc-worker-0.vc",
                                      "vc-worker-1.vc"}));
  EXPECT_EQ(VolcanoNodeRank(VolcanoHosts(env, "/nonexistent"), "vc-worker-1"), 3);
  EXPECT_EQ(VolcanoNodeRank(VolcanoHosts(env, "/nonexistent"), "other"), -1);
}

TEST(VolcanoHostsTest, HostFilesWhenTheEnvironmentHasNone) {
  std::string dir = testing::TempDir() + "/volcano_hosts_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/worker.host") << "vc-worker-0.vc\nvc-worker-1.vc\n";
  std::ofstream(dir + "/master.host") << "vc-master-0.vc";
  EXPECT_EQ(VolcanoHosts({}, dir),
            (std::vector<std::string>{"vc-master-0.vc", "vc-worker-0.vc", "vc-worker-1.vc"}));
  EXPECT_TRUE(VolcanoHosts({}, dir + "/missing").empty());
}

TEST(VolcanoHostsTest, SvcPluginAloneGivesNodesRankAndEndpoint) {
  auto c = ParseRunFlags({"--no-python", "true"}, kSvcEnv, {.cpus = 4, .hostname = "vc-worker-1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 3);
  EXPECT_EQ(c->node_rank, 2);  // not VC_TASK_INDEX, the index within the worker task
  EXPECT_EQ(c->rdzv_host_name, "vc-master-0.vc");
  EXPECT_EQ(c->rdzv_port, 29400);
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kNever);
  EXPECT_NE(c->convention.find("Volcano"), std::string::npos) << c->convention;

  auto master =
      ParseRunFlags({"--no-python", "true"}, kSvcEnv, {.cpus = 4, .hostname = "vc-master-0"});
  ASSERT_TRUE(master.ok()) << master.status();
  EXPECT_EQ(master->node_rank, 0);
  EXPECT_EQ(master->rdzv_hosting, RdzvHosting::kAlways);

  auto stranger =
      ParseRunFlags({"--no-python", "true"}, kSvcEnv, {.cpus = 4, .hostname = "laptop"});
  ASSERT_FALSE(stranger.ok());
  EXPECT_NE(std::string(stranger.status().message()).find("give --node-rank"), std::string::npos)
      << stranger.status();
  // A flag still wins.
  auto flagged = ParseRunFlags({"--node-rank", "1", "--no-python", "true"}, kSvcEnv,
                               {.cpus = 4, .hostname = "laptop"});
  ASSERT_TRUE(flagged.ok()) << flagged.status();
  EXPECT_EQ(flagged->node_rank, 1);
}

}  // namespace
}  // namespace muster

#include "agent/workers/worker_specs.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "agent/lifecycle/test_helpers.h"
#include "agent/workers/worker_env.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

using testing_helpers::AsMap;

rdzv::Assignment TwoNodeRound() {
  return rdzv::Assignment{.round = 3,
                          .restart_count = 1,
                          .group_rank = 1,
                          .group_world_size = 2,
                          .rank_base = 2,
                          .world_size = 4,
                          .master_addr = "10.0.0.1",
                          .master_port = 40000};
}

Config TwoWorkers() {
  Config c;
  c.nproc_per_node = 2;  // as parsed; TwoWorkersPlan says what runs
  c.command = {"train.py", "--lr", "0.1"};
  return c;
}

// What the resolve step finds for TwoWorkers (agent/config/run_plan.h).
WorkerPlan TwoWorkersPlan() { return WorkerPlan{.nproc = 2, .env_base = {{"HOME", "/root"}}}; }

// The specs of TwoNodeRound under run directory /r on host h, from the plan the resolve step
// makes of `c` and `w`.
std::vector<WorkerSpec> Specs(const Config& c, const WorkerPlan& w, const CpuLayout& cpus = {}) {
  return BuildWorkerSpecs(ResolveRunPlan(c, w), PlanNodeRound(c, TwoNodeRound(), "job", 0), "/r",
                          "h", cpus);
}

TEST(WorkerSpecsTest, PlacementEnvAndFilesPerLocalRank) {
  Config c = TwoWorkers();
  NodeRound round = PlanNodeRound(c, TwoNodeRound(), "job7", 0);
  std::vector<WorkerSpec> specs =
      BuildWorkerSpecs(ResolveRunPlan(c, TwoWorkersPlan()), round, "/run/job7_x", "node-1", {});
  ASSERT_EQ(specs.size(), 2u);
  const WorkerSpec& s = specs[1];
  EXPECT_EQ(s.placement.local_rank, 1);
  EXPECT_EQ(s.placement.rank, 3);
  EXPECT_EQ(s.placement.group_rank, 1);
  EXPECT_EQ(s.dir, "/run/job7_x/attempt_1/1");
  EXPECT_EQ(s.error_file, "/run/job7_x/attempt_1/1/error.json");
  EXPECT_EQ(s.output_prefix, "[default1]:");
  EXPECT_EQ(s.spawn.argv, (std::vector<std::string>{"python3", "-u", "train.py", "--lr", "0.1"}));
  auto env = AsMap(s.spawn.env);
  EXPECT_EQ(env["RANK"], "3");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "40000");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "True");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "1");
  EXPECT_EQ(env["TORCHELASTIC_RUN_ID"], "job7");
  EXPECT_EQ(env["TORCHELASTIC_ERROR_FILE"], s.error_file);
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");  // torchrun's default for several workers
  EXPECT_TRUE(s.spawn.cpus.empty());
  EXPECT_TRUE(std::is_sorted(s.spawn.env.begin(), s.spawn.env.end()));
  // Without --log-dir, -r or -t: console only.
  EXPECT_TRUE(s.out.to_console);
  EXPECT_TRUE(s.out.file.empty());
}

TEST(WorkerSpecsTest, StaticStoreUsesMasterFlagsOrTheFreePort) {
  Config c = TwoWorkers();
  c.store = StoreOwner::kRank0;
  c.max_nodes = 2;
  c.master_port = 29501;
  NodeRound fixed = PlanNodeRound(c, TwoNodeRound(), "job", 0);
  EXPECT_FALSE(fixed.info.use_agent_store);
  EXPECT_EQ(fixed.info.master_port, 29501);
  EXPECT_EQ(fixed.info.master_addr, "10.0.0.1");  // several nodes: group rank 0's address

  c.standalone = true;
  c.max_nodes = 1;
  c.master_addr = "127.0.0.1";
  ASSERT_TRUE(NeedsFreeMasterPort(c));
  NodeRound picked = PlanNodeRound(c, TwoNodeRound(), "job", 45678);
  EXPECT_EQ(picked.info.master_port, 45678);
  EXPECT_EQ(picked.info.master_addr, "127.0.0.1");
  c.master_port_given = true;
  EXPECT_FALSE(NeedsFreeMasterPort(c));
}

TEST(WorkerSpecsTest, AdvertisedAddressKeepsLocalhostAndPortIsFixedOnOneNode) {
  Config c = TwoWorkers();
  c.master_addr = "127.0.0.1";
  EXPECT_EQ(AdvertisedAddress(c), "127.0.0.1");  // one node: --master-addr
  c.rdzv_host_name = "localhost";
  EXPECT_EQ(AdvertisedAddress(c), "localhost");  // the name the user gave, not ::1
  c.local_addr = "10.0.0.7";
  EXPECT_EQ(AdvertisedAddress(c), "10.0.0.7");
  c.local_addr.clear();
  c.rdzv_host_name = "node0";
  EXPECT_EQ(AdvertisedAddress(c), "");  // the server records what it sees

  c.max_nodes = 1;
  c.store = StoreOwner::kAgent;
  EXPECT_EQ(FixedStorePort(c), 0);
  c.master_port = 29511;
  c.master_port_given = true;
  EXPECT_EQ(FixedStorePort(c), 29511);
  c.max_nodes = 2;
  EXPECT_EQ(FixedStorePort(c), 0);
}

TEST(WorkerSpecsTest, BoundCoresGiveEachRankItsShareAndOmpThreads) {
  Config c = TwoWorkers();
  WorkerPlan w = TwoWorkersPlan();
  c.bind_cores_to_rank = true;
  CpuLayout cpus{.available = {0, 1, 2, 3, 4, 5}, .numa_of = {}};
  std::vector<WorkerSpec> specs = Specs(c, w, cpus);
  EXPECT_EQ(specs[0].spawn.cpus, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(specs[1].spawn.cpus, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(AsMap(specs[1].spawn.env)["OMP_NUM_THREADS"], "3");
  EXPECT_TRUE(std::is_sorted(specs[1].spawn.env.begin(), specs[1].spawn.env.end()));
  EXPECT_EQ(std::count_if(specs[1].spawn.env.begin(), specs[1].spawn.env.end(),
                          [](const std::string& kv) { return kv.starts_with("OMP_NUM_THREADS="); }),
            1);
  // The user's own value wins.
  w.env_base["OMP_NUM_THREADS"] = "8";
  specs = Specs(c, w, cpus);
  EXPECT_EQ(AsMap(specs[0].spawn.env)["OMP_NUM_THREADS"], "8");
}

// --numa-binding: each rank's resolved placement becomes its spawn's CPU set and preferred
// memory node; without a memory policy (refused here), CPUs only. OMP_NUM_THREADS stays
// torchrun's (it changes nothing there either).
TEST(WorkerSpecsTest, NumaPlacementsReachEachRanksSpawn) {
  Config c = TwoWorkers();
  c.numa_binding = NumaBindingMode::kExclusive;
  WorkerPlan w = TwoWorkersPlan();
  w.numa_placements = {{.node = 1, .cpus = {8, 9}}, {.node = 1, .cpus = {10, 11}}};
  w.numa_memory = true;
  std::vector<WorkerSpec> specs = Specs(c, w);
  EXPECT_EQ(specs[0].spawn.cpus, (std::vector<int>{8, 9}));
  EXPECT_EQ(specs[1].spawn.cpus, (std::vector<int>{10, 11}));
  EXPECT_EQ(specs[1].spawn.preferred_memory_node, 1);
  Config unbound = TwoWorkers();
  EXPECT_EQ(AsMap(specs[1].spawn.env)["OMP_NUM_THREADS"],
            AsMap(Specs(unbound, TwoWorkersPlan())[1].spawn.env)["OMP_NUM_THREADS"]);
  w.numa_memory = false;
  specs = Specs(c, w);
  EXPECT_EQ(specs[0].spawn.cpus, (std::vector<int>{8, 9}));
  EXPECT_EQ(specs[0].spawn.preferred_memory_node, -1);
}

// --virtual-local-rank: each worker's env and --local_rank argument say local rank 0, its
// console prefix and directory keep the real one.
TEST(WorkerSpecsTest, VirtualLocalRankGivesEachWorkerItsOwnDevice) {
  Config c = TwoWorkers();
  c.virtual_local_rank = true;
  c.local_rank_arg = true;
  WorkerPlan w = TwoWorkersPlan();
  w.env_base["CUDA_VISIBLE_DEVICES"] = "2,3";
  std::vector<WorkerSpec> specs = Specs(c, w);
  for (int local : {0, 1}) {
    auto env = AsMap(specs[local].spawn.env);
    EXPECT_EQ(env["LOCAL_RANK"], "0");
    EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], local == 0 ? "2" : "3");
    EXPECT_EQ(specs[local].spawn.argv.back(), "--local_rank=0");
  }
  EXPECT_EQ(specs[1].output_prefix, "[default1]:");
  EXPECT_EQ(specs[1].dir, "/r/attempt_1/1");
}

// `muster launch --local-rank-arg` with torch 2: one argument, the spelling asked for (it
// passed torch's --local-rank=N and --local_rank=N both).
TEST(WorkerSpecsTest, LaunchWithLocalRankArgPassesOneArgument) {
  Config c = TwoWorkers();
  c.legacy_local_rank_arg = true;
  const WorkerPlan w{.torch = TorchVersion{.major = 2, .minor = 1}};
  std::vector<std::string> argv = BuildWorkerArgv(c, w, 1);
  EXPECT_EQ(argv.back(), "--local-rank=1");
  c.local_rank_arg = true;
  argv = BuildWorkerArgv(c, w, 1);
  EXPECT_EQ(argv.back(), "--local_rank=1");
  EXPECT_EQ(std::count_if(argv.begin(), argv.end(),
                          [](const std::string& a) { return absl::StrContains(a, "local"); }),
            1);
}

TEST(WorkerSpecsTest, StreamsFollowRedirectsTeeAndFilter) {
  Config c = TwoWorkers();
  c.redirects.by_rank[StreamSelection::kAllRanks] = 1;  // -r 1: stdout to files only
  c.tee.by_rank[1] = 2;                                 // -t 1:2: rank 1's stderr to both
  c.local_ranks_filter = {1};
  std::vector<WorkerSpec> specs = Specs(c, TwoWorkersPlan());
  EXPECT_EQ(specs[0].out.file, "/r/attempt_1/0/stdout.log");
  EXPECT_FALSE(specs[0].out.to_console);
  EXPECT_FALSE(specs[0].err.to_console);  // filtered out
  EXPECT_TRUE(specs[0].err.file.empty());
  EXPECT_EQ(specs[1].err.file, "/r/attempt_1/1/stderr.log");
  EXPECT_TRUE(specs[1].err.to_console);
  EXPECT_FALSE(specs[1].out.to_console);
}

}  // namespace
}  // namespace muster

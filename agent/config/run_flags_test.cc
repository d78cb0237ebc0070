#include "agent/config/run_flags.h"

#include <unistd.h>

#include "agent/config/config_check.h"
#include "agent/lifecycle/test_helpers.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

// No driver, no hostname, no /dev/termination-log: whatever machine runs the test.
const HostInfo kHost{.cpus = 6, .gpus = 0};

absl::StatusOr<Config> Parse(std::vector<std::string> args,
                             std::map<std::string, std::string> env = {}) {
  return ParseRunFlags(args, env, kHost);
}

void ExpectError(const absl::Status& status, const std::string& needle) {
  testing_helpers::ExpectInvalid(status, needle);
}
void ExpectError(const absl::StatusOr<Config>& c, const std::string& needle) {
  ExpectError(c.status(), needle);
}

// Parsing, then the check against this host's filesystem, as `muster run` does.
absl::Status ParseAndCheck(std::vector<std::string> args) {
  absl::StatusOr<Config> c = Parse(std::move(args));
  if (!c.ok()) return c.status();
  return CheckRunConfig(&*c);
}

TEST(FlagsTest, DashAndUnderscoreSpellingsAndCommandRemainder) {
  auto c = Parse({"--nproc_per_node=3", "--max-restarts", "2", "--no-python", "/bin/echo",
                  "--nproc-per-node", "9"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->nproc_per_node, 3);
  EXPECT_EQ(c->max_restarts, 2);
  EXPECT_EQ(c->command, (std::vector<std::string>{"/bin/echo", "--nproc-per-node", "9"}));
}

TEST(FlagsTest, PrecedenceFlagThenMusterThenPet) {
  std::map<std::string, std::string> env = {
      {"MUSTER_NPROC_PER_NODE", "2"}, {"PET_NPROC_PER_NODE", "5"}, {"PET_MAX_RESTARTS", "4"}};
  auto c = Parse({"--no-python", "true"}, env);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->nproc_per_node, 2);
  EXPECT_EQ(c->max_restarts, 4);
  EXPECT_EQ(c->sources["nproc-per-node"], "MUSTER_NPROC_PER_NODE");
  c = Parse({"--nproc-per-node", "7", "--no-python", "true"}, env);
  EXPECT_EQ(c->nproc_per_node, 7);
}

TEST(FlagsTest, WarmStartIsOffByDefaultAndPreloadsTorch) {
  auto c = Parse({"train.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->warm_start);
  EXPECT_EQ(c->preload, (std::vector<std::string>{"torch"}));
  c = Parse({"--warm-start", "--preload", "torch, transformers,my_pkg.models", "train.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->warm_start);
  EXPECT_EQ(c->preload, (std::vector<std::string>{"torch", "transformers", "my_pkg.models"}));
  c = Parse({"--warm-start", "train.py"}, {{"MUSTER_PRELOAD", ""}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->preload.empty());
  ExpectError(Parse({"--preload", "torch;rm", "train.py"}), "--preload");
  ExpectError(Parse({"--preload", ".torch", "train.py"}), "not a Python module name");
  // The cluster may set MUSTER_WARM_START for every job: --no-python then keeps exec.
  EXPECT_TRUE(Parse({"--no-python", "true"}, {{"MUSTER_WARM_START", "1"}}).ok());
}

TEST(FlagsTest, NprocKinds) {
  EXPECT_EQ(Parse({"--nproc-per-node", "cpu", "--no-python", "true"})->nproc_per_node, 6);
  EXPECT_EQ(Parse({"--nproc-per-node", "auto", "--no-python", "true"})->nproc_per_node, 6);
  ExpectError(Parse({"--nproc-per-node", "gpu", "--no-python", "true"}), "no GPU");
  ExpectError(Parse({"--nproc-per-node", "xpu", "--no-python", "true"}),
              "give the number of workers");
  std::vector<std::string> gpu = {"--nproc-per-node", "gpu", "--no-python", "true"};
  EXPECT_EQ(ParseRunFlags(gpu, {}, {.cpus = 6, .gpus = 8})->nproc_per_node, 8);
  // No GPU seen but a driver may be here: 0 for now, the GPU probe counts them at start.
  auto later = ParseRunFlags(gpu, {}, {.cpus = 6, .driver_may_be_present = true});
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(later->nproc_per_node, 0);
  gpu.insert(gpu.begin(), {"--probe", "off"});
  ExpectError(ParseRunFlags(gpu, {}, {.cpus = 6, .driver_may_be_present = true}), "no GPU");
}

TEST(FlagsTest, BadInputNamesTheFlagOrVariable) {
  ExpectError(Parse({"--nproc-per-node", "abc", "--no-python", "true"}), "--nproc-per-node");
  ExpectError(Parse({"--nnodes", "3:2", "--no-python", "true"}), "--nnodes");
  ExpectError(Parse({"--max-restarts", "-1", "--no-python", "true"}), "--max-restarts");
  ExpectError(Parse({"--bogus", "--no-python", "true"}), "--bogus");
  ExpectError(ParseAndCheck({"missing_script.py"}), "missing_script.py");
  ExpectError(Parse({"--no-python", "true"}, {{"WORLD_SIZE", "abc"}}), "WORLD_SIZE");
  ExpectError(Parse({"--no-python", "true"}, {{"MUSTER_MAX_RESTARTS", "x"}}),
              "MUSTER_MAX_RESTARTS");
  ExpectError(Parse({"--restart-policy", "sometimes", "--no-python", "true"}), "--restart-policy");
  ExpectError(Parse({"--shutdown-timeout", "soon", "--no-python", "true"}), "--shutdown-timeout");
  ExpectError(Parse({"--signals-to-handle", "SIGKILL", "--no-python", "true"}),
              "--signals-to-handle");
  ExpectError(Parse({"--redirects", "7", "--no-python", "true"}), "--redirects");
  ExpectError(Parse({"-m", "--no-python", "x"}), "--module");
  ExpectError(Parse({"--max-restarts"}), "needs a value");
  ExpectError(Parse({}), "command");
  ExpectError(Parse({"--nnodes", "2", "--no-python", "true"}), "--nnodes");
}

TEST(FlagsTest, Streams) {
  auto c = Parse({"-r", "0:1,1:3", "-t", "2", "--no-python", "true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->redirects.For(0), 1);
  EXPECT_EQ(c->redirects.For(1), 3);
  EXPECT_EQ(c->redirects.For(2), 0);
  EXPECT_EQ(c->tee.For(5), 2);
}

// Each value is consumed whole: a parser that stops early ("1-2-3" read as 1-2) silently runs
// something other than what was asked.
TEST(FlagsTest, ValuesAreConsumedWhole) {
  auto with = [](std::vector<std::string> flags, std::map<std::string, std::string> env = {}) {
    flags.insert(flags.end(), {"--no-python", "true"});
    return Parse(flags, env);
  };
  ExpectError(with({"--bind-core-list", "1-2-3"}), "--bind-core-list: '1-2-3'");
  ExpectError(with({"--bind-core-list", "0,,3"}), "--bind-core-list");
  ExpectError(with({"--bind-core-list", "0-3,2"}), "CPU 2 is listed twice");
  EXPECT_EQ(with({"--bind-core-list", "0-2, 5"})->bind_core_list, (std::vector<int>{0, 1, 2, 5}));

  ExpectError(with({"-r", "0:1:2"}), "--redirects: '0:1:2' must be LOCAL_RANK:STREAMS");
  ExpectError(with({"-t", "0:1,0:2"}), "--tee: local rank 0 is given twice");
  ExpectError(with({"-t", "0:1,"}), "--tee");
  ExpectError(with({}, {{"MUSTER_REDIRECTS", "1:3:3"}}), "MUSTER_REDIRECTS");

  ExpectError(with({"--rdzv-conf", "is_host=maybe"}), "is_host: 'maybe' is not a boolean");
  ExpectError(with({"--rdzv-conf", "is_host="}), "is_host has no value");
  ExpectError(with({"--rdzv-conf", "join_timeout=5s,,is_host=1"}), "an item has no key");
  ExpectError(with({"--rdzv-conf", "read_timeout=soon"}), "read_timeout");
  for (auto [text, hosting] :
       std::vector<std::pair<std::string, RdzvHosting>>{{"is_host=1", RdzvHosting::kAlways},
                                                        {"is_host=Y", RdzvHosting::kAlways},
                                                        {"is_host=false", RdzvHosting::kNever},
                                                        {"is_host=n", RdzvHosting::kNever}}) {
    auto c = with({"--rdzv-conf", text});
    ASSERT_TRUE(c.ok()) << text << ": " << c.status();
    EXPECT_EQ(c->rdzv_hosting, hosting) << text;
  }
  auto spaced = with({"--rdzv-conf", " join_timeout = 5s , heartbeat_misses=4 "});
  ASSERT_TRUE(spaced.ok()) << spaced.status();  // torch strips blanks around keys and values
  EXPECT_EQ(spaced->join_timeout, absl::Seconds(5));
  EXPECT_EQ(spaced->heartbeat_misses, 4);

  ExpectError(with({"--rdzv-endpoint", "node0:29400:1"}), "--rdzv-endpoint: 'node0:29400:1'");
  EXPECT_EQ(with({"--rdzv-endpoint", "[::1]:29401"})->rdzv_port, 29401);
  EXPECT_EQ(with({"--rdzv-endpoint", "fe80::1%eth0"})->rdzv_host_name, "fe80::1%eth0");

  ExpectError(with({}, {{"MUSTER_SIGNALS_TO_HANDLE", "SIGTERM,,SIGINT"}}),
              "MUSTER_SIGNALS_TO_HANDLE: ");
  ExpectError(with({"--signals-to-handle", "SIGTERM,SIGKILL"}),
              "--signals-to-handle: SIGKILL cannot be handled");
  auto codes = with({"--restartable-exit-codes", "130,,137"});
  ExpectError(codes, "--restartable-exit-codes: '' is not an exit code");
  EXPECT_EQ(std::string(codes.status().message()).find("--restartable-exit-codes", 5),
            std::string::npos)
      << "the flag is named once: " << codes.status().message();
  EXPECT_TRUE(with({"--restartable-exit-codes", ""})->restartable_exit_codes.empty());
  ExpectError(with({"--local-ranks-filter", "0,,3"}), "--local-ranks-filter");
  // torchrun's default value, "", shows every local rank.
  EXPECT_TRUE(with({"--local-ranks-filter", ""})->local_ranks_filter.empty());
  EXPECT_EQ(with({"--local-ranks-filter", "0,3"})->local_ranks_filter.size(), 2u);

  ExpectError(with({"--log-level", "verbose"}), "--log-level: 'verbose' is not a log level");
  ExpectError(with({}, {{"LOGLEVEL", "LOUD"}}), "LOGLEVEL");
  EXPECT_EQ(with({}, {{"LOGLEVEL", "WARN"}})->log_level, "warning");
  // The flag wins over LOGLEVEL, which is then not looked at.
  EXPECT_EQ(with({"--log-level", "DEBUG"}, {{"LOGLEVEL", "LOUD"}})->log_level, "debug");
}

// Values that travel to other processes in proto3 strings (UTF-8 only) or gRPC metadata
// (printable ASCII) are refused where they enter, naming the flag or variable.
TEST(FlagsTest, ValuesSentToOtherNodesAreText) {
  auto with = [](std::vector<std::string> flags, std::map<std::string, std::string> env = {}) {
    flags.insert(flags.end(), {"--no-python", "true"});
    return Parse(flags, env);
  };
  ExpectError(with({"--rdzv-id", "caf\xE9"}), "--rdzv-id: 'caf\\xE9' is not valid UTF-8");
  ExpectError(with({}, {{"PET_RDZV_ID", "job\xFF"}}), "PET_RDZV_ID");
  ExpectError(with({}, {{"MUSTER_RUN_ID", "a\nb"}}), "MUSTER_RUN_ID");
  ExpectError(with({"--run-id", std::string(200, 'j')}), "--run-id");
  EXPECT_EQ(with({"--rdzv-id", "job-7.a_b"})->run_id, "job-7.a_b");
  ExpectError(with({"--local-addr", "10.0.0.1 "}), "--local-addr");
  ExpectError(with({}, {{"POD_IP", "10.0.0.\xB9"}}), "POD_IP");
  EXPECT_EQ(with({}, {{"POD_IP", "10.0.0.9"}})->local_addr, "10.0.0.9");
  ExpectError(with({"--master-addr", "a b"}), "--master-addr");
  ExpectError(with({"--rdzv-endpoint",
                    "n\xF6"
                    "de:29400"}),
              "--rdzv-endpoint");
  ExpectError(with({}, {{"MUSTER_TOKEN", "abc\n"}}), "MUSTER_TOKEN");
}

// Parsing looks at nothing but its arguments and HostInfo, so the same words give the same
// Config on any machine; the filesystem is CheckRunConfig's (config_check_test.cc).
TEST(FlagsTest, ParsingLeavesTheFilesystemAlone) {
  std::string dir = testing::TempDir() + "/run_flags_test_never_made/logs";
  auto c = Parse({"--log-dir", dir, "--tls-cert", "/no/such.pem", "--tls-key", "/no/such.key",
                  "missing_script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir << " was made while parsing";
  EXPECT_EQ(c->log_dir, dir);
  EXPECT_EQ(c->tls_cert, "/no/such.pem");
}

TEST(FlagsTest, HostFactsComeFromHostInfo) {
  EXPECT_EQ(Parse({"--no-python", "true"})->termination_log, "");
  EXPECT_EQ(ParseRunFlags({"--no-python", "true"}, {}, {.termination_log_writable = true})
                ->termination_log,
            "/dev/termination-log");
  EXPECT_EQ(ParseRunFlags({"--termination-log", "/t", "--no-python", "true"}, {},
                          {.termination_log_writable = true})
                ->termination_log,
            "/t");
  // An endpoint that names this Pod behind its headless Service: this agent hosts.
  std::vector<std::string> args = {"--nnodes",      "2",           "--rdzv-endpoint",
                                   "job-0.job-svc", "--no-python", "true"};
  auto pod = ParseRunFlags(args, {}, {.hostname = "job-0"});
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->rdzv_hosting, RdzvHosting::kAlways);
  EXPECT_EQ(ParseRunFlags(args, {}, {.hostname = "job-1"})->rdzv_hosting, RdzvHosting::kAuto);
  EXPECT_EQ(Parse(args)->rdzv_hosting, RdzvHosting::kAuto);
}

// Issue 28: with node ranks given, node rank 0 serves the rendezvous and the others only join,
// also on the endpoint's own host (two agents on one machine), so the store of group rank 0
// shares the endpoint's port whichever agent starts first. An explicit choice still wins.
TEST(FlagsTest, NodeRankZeroServesTheRendezvous) {
  auto with = [](std::vector<std::string> flags) {
    std::vector<std::string> args = {"--nnodes", "2", "--rdzv-endpoint", "127.0.0.1:29400"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--no-python", "true"});
    return Parse(args);
  };
  auto one = with({"--node-rank", "1"});
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->rdzv_hosting, RdzvHosting::kNever);
  EXPECT_EQ(one->SourceOf("rdzv-host"), "--node-rank 1: node rank 0 serves");
  EXPECT_EQ(with({"--node-rank", "0"})->rdzv_hosting, RdzvHosting::kAuto);
  EXPECT_EQ(with({})->rdzv_hosting, RdzvHosting::kAuto);  // no ranks: the first to bind serves
  EXPECT_EQ(with({"--node-rank", "1", "--rdzv-host", "true"})->rdzv_hosting, RdzvHosting::kAlways);
  EXPECT_EQ(with({"--node-rank", "1", "--rdzv-conf", "is_host=1"})->rdzv_hosting,
            RdzvHosting::kAlways);
  // etcd hosts nothing: node rank 1 is not told that rank 0 serves (--rdzv-backend comes
  // after the rendezvous flags in the table, so the rule must wait for it).
  auto etcd = with({"--node-rank", "1", "--rdzv-backend", "etcd"});
  ASSERT_TRUE(etcd.ok()) << etcd.status();
  EXPECT_EQ(etcd->rdzv_hosting, RdzvHosting::kAuto);
  EXPECT_EQ(etcd->sources.count("rdzv-host"), 0u);
}

// Config's modes are enums; each flag spelling maps to one, and the error lists them all.
TEST(FlagsTest, ModesParseToEnums) {
  auto with = [](std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--no-python", "true"});
    return Parse(flags);
  };
  auto c = with({"--probe", "nccl", "--stale-gpu-policy", "kill", "--store", "rank0", "--rdzv-host",
                 "false"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->probe, ProbeMode::kNccl);
  EXPECT_EQ(c->stale_gpu_policy, StaleGpuPolicy::kKill);
  EXPECT_EQ(c->store, StoreOwner::kRank0);
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kNever);
  c = with({});
  EXPECT_EQ(c->probe, ProbeMode::kAuto);
  EXPECT_EQ(c->stale_gpu_policy, StaleGpuPolicy::kFail);
  EXPECT_EQ(c->store, StoreOwner::kAgent);
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kAuto);
  ExpectError(with({"--probe", "on"}), "--probe: 'on' must be off, auto, inventory or nccl");
  ExpectError(with({"--stale-gpu-policy", "x"}),
              "--stale-gpu-policy: 'x' must be fail, wait or kill");
  ExpectError(with({"--store", "rank1"}), "--store: 'rank1' must be agent or rank0");
  ExpectError(with({"--rdzv-host", "yes"}), "--rdzv-host: 'yes' must be auto, true or false");
  for (ProbeMode m : {ProbeMode::kOff, ProbeMode::kAuto, ProbeMode::kInventory, ProbeMode::kNccl}) {
    EXPECT_EQ(ParseMode<ProbeMode>(ModeName(m)), m) << ModeName(m);
  }
}

TEST(FlagsTest, HelpMentionsEveryGroupAndDefaults) {
  std::string help = RunHelp();
  for (const char* s : {"Job:", "Failures:", "Output:", "--nproc-per-node", "(default: 30s)"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s;
  }
  EXPECT_TRUE(RunHelpRequested({"--nnodes", "1", "--help"}));
  EXPECT_FALSE(RunHelpRequested({"script.py", "--help"}));
}

}  // namespace
}  // namespace muster

namespace muster {
namespace {

TEST(ConventionsTest, KubeflowPetVariables) {
  std::map<std::string, std::string> env = {
      {"PET_NNODES", "3"},          {"PET_NODE_RANK", "0"},       {"PET_NPROC_PER_NODE", "2"},
      {"PET_MASTER_ADDR", "job-m"}, {"PET_MASTER_PORT", "23456"}, {"MASTER_ADDR", "job-m"},
      {"MASTER_PORT", "23456"},     {"WORLD_SIZE", "6"},          {"RANK", "0"}};
  auto c = ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 3);  // PET_NNODES, not the pod-level WORLD_SIZE of 6
  EXPECT_EQ(c->nproc_per_node, 2);
  EXPECT_EQ(c->node_rank, 0);
  EXPECT_EQ(c->rdzv_host_name, "job-m");
  EXPECT_EQ(c->rdzv_port, 23456);
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kAlways);  // rank 0 hosts the rendezvous
  EXPECT_NE(c->convention.find("Kubeflow"), std::string::npos);
}

TEST(ConventionsTest, TrainJobPetVariablesWithAutoNproc) {
  // Kubeflow Trainer v2's torch plugin (pkg/runtime/framework/plugins/torch/torch.go): no
  // pod-level MASTER_*/WORLD_SIZE/RANK; the node rank is the Job's completion index.
  std::map<std::string, std::string> env = {
      {"PET_NNODES", "2"},          {"PET_NPROC_PER_NODE", "auto"},
      {"PET_NODE_RANK", "1"},       {"PET_MASTER_ADDR", "tj-node-0-0.tj"},
      {"PET_MASTER_PORT", "29500"}, {"JOB_COMPLETION_INDEX", "1"}};
  auto c = ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 2);
  EXPECT_EQ(c->node_rank, 1);
  EXPECT_EQ(c->rdzv_host_name, "tj-node-0-0.tj");
  EXPECT_EQ(c->rdzv_port, 29500);
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kNever);
  EXPECT_NE(c->convention.find("TrainJob"), std::string::npos);
}

TEST(ConventionsTest, LeaderWorkerSetGroupIsTheJob) {
  // What the LWS pod webhook injects (kubernetes-sigs/lws pkg/utils/pod/pod_utils.go,
  // AddLWSVariables) into worker 2 of group 0 of LeaderWorkerSet "lws" in "default".
  std::map<std::string, std::string> env = {{"LWS_LEADER_ADDRESS", "lws-0.lws.default"},
                                            {"LWS_GROUP_SIZE", "3"},
                                            {"LWS_WORKER_INDEX", "2"}};
  auto c = ParseRunFlags({"--nproc-per-node", "2", "--no-python", "true"}, env, {.cpus = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 3);
  EXPECT_EQ(c->node_rank, 2);
  EXPECT_EQ(c->rdzv_host_name, "lws-0.lws.default");
  EXPECT_EQ(c->rdzv_port, 29400);  // LWS names no port: the rendezvous' default
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kNever);
  EXPECT_EQ(c->convention,
            "LeaderWorkerSet: nodes=3 (LWS_GROUP_SIZE), node rank=2 (LWS_WORKER_INDEX), "
            "rendezvous at lws-0.lws.default:29400 (LWS_LEADER_ADDRESS)");
  // The leader (worker index 0) serves the rendezvous, whatever its hostname.
  env["LWS_WORKER_INDEX"] = "0";
  auto leader = ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4});
  ASSERT_TRUE(leader.ok()) << leader.status();
  EXPECT_EQ(leader->rdzv_hosting, RdzvHosting::kAlways);
  // Bad values name the variable.
  env["LWS_WORKER_INDEX"] = "3";
  ExpectError(ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4}),
              "LWS_WORKER_INDEX: node rank 3 is outside 0..2 (LWS_GROUP_SIZE says 3 nodes)");
  env["LWS_WORKER_INDEX"] = "x";
  ExpectError(ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4}), "LWS_WORKER_INDEX");
  env["LWS_WORKER_INDEX"] = "1";
  env["LWS_GROUP_SIZE"] = "0";
  ExpectError(ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4}),
              "LWS_GROUP_SIZE: '0' in the environment is not a node count");
  env["LWS_GROUP_SIZE"] = "2";
  env["LWS_LEADER_ADDRESS"] = "lws-0.lws:80";
  ExpectError(ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4}),
              "LWS_LEADER_ADDRESS: 'lws-0.lws:80'");
}

TEST(ConventionsTest, VolcanoAndT9kWorldSizeIsNodeCount) {
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "m"}, {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "4"}, {"RANK", "2"}};
  auto c = ParseRunFlags({"--nproc-per-node", "8", "--no-python", "true"}, env, {.cpus = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 4);
  EXPECT_EQ(c->node_rank, 2);
  // MASTER_ADDR is rank 0's: another rank never serves, also on the same host.
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kNever);
  EXPECT_EQ(c->nproc_per_node, 8);
}

TEST(ConventionsTest, FlagsWinOverConventions) {
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "m"}, {"WORLD_SIZE", "4"}, {"RANK", "2"}, {"JOB_COMPLETION_INDEX", "3"}};
  auto c = ParseRunFlags(
      {"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "x:1", "--no-python", "true"}, env,
      {.cpus = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 2);
  EXPECT_EQ(c->node_rank, 1);
  EXPECT_EQ(c->rdzv_host_name, "x");
}

TEST(ConventionsTest, MalformedOperatorVariablesAreNamed) {
  auto parse = [](std::map<std::string, std::string> env) {
    return ParseRunFlags({"--no-python", "true"}, env, {.cpus = 4});
  };
  ExpectError(parse({{"VK_TASK_INDEX", "abc"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}}),
              "VK_TASK_INDEX");
  ExpectError(parse({{"MASTER_ADDR", "m:23456"}, {"WORLD_SIZE", "2"}, {"RANK", "1"}}),
              "MASTER_ADDR: 'm:23456'");
  ExpectError(parse({{"PET_NNODES", "2"}, {"PET_MASTER_ADDR", "m"}, {"PET_MASTER_PORT", "99x"}}),
              "PET_MASTER_PORT");
  // PET_MASTER_PORT is also --master-port's PET_ spelling: the convention, which reads it as
  // the rendezvous port, speaks first.
  ExpectError(parse({{"PET_NNODES", "2"}, {"PET_MASTER_ADDR", "m"}, {"PET_MASTER_PORT", "0"}}),
              "PET_MASTER_PORT: '0' in the environment is not a port (1..65535)");
}

TEST(ConventionsTest, IndexedJobGivesRankAndRankOutsideNodesIsNamed) {
  auto c = ParseRunFlags({"--nnodes", "4", "--rdzv-endpoint", "job-0.svc", "--no-python", "true"},
                         {{"JOB_COMPLETION_INDEX", "3"}}, {.cpus = 4});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_rank, 3);
  auto bad = ParseRunFlags({"--no-python", "true"},
                           {{"MASTER_ADDR", "m"}, {"WORLD_SIZE", "2"}, {"RANK", "5"}}, {.cpus = 4});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("RANK"), std::string::npos);
}

TEST(FlagsTest, StandaloneContradictionsNameBothSources) {
  ExpectError(Parse({"--standalone", "--nnodes", "2", "--no-python", "true"}),
              "--standalone: runs one node, but --nnodes asks for 2 nodes");
  ExpectError(Parse({"--standalone", "--nnodes", "1:4", "--no-python", "true"}),
              "asks for up to 4 nodes");
  ExpectError(Parse({"--standalone", "--no-python", "true"}, {{"PET_NNODES", "3"}}),
              "but PET_NNODES asks for 3 nodes");
  ExpectError(Parse({"--standalone", "--rdzv-endpoint", "h:29400", "--no-python", "true"}),
              "--rdzv-endpoint names another: drop one of them");
  EXPECT_TRUE(Parse({"--standalone", "--nnodes", "1", "--no-python", "true"}).ok());
}

}  // namespace
}  // namespace muster

namespace muster {
namespace {

TEST(FlagsTest, UnknownFlagSuggestsTheClosest) {
  ExpectError(Parse({"--nproc_per_nodes", "2", "train.py"}),
              "--nproc_per_nodes: unknown flag; did you mean --nproc-per-node? see `muster run "
              "--help`");
  // (--max-restart would be a unique abbreviation, accepted as argparse does.)
  ExpectError(Parse({"--max-restrats=2", "train.py"}), "did you mean --max-restarts?");
  // Nothing close: no guess.
  absl::StatusOr<Config> far = Parse({"--completely-else", "train.py"});
  ExpectError(far, "--completely-else: unknown flag; see `muster run --help`");
}

TEST(FlagsTest, MisspelledMusterVariableWarnsNamingTheOneMeant) {
  auto c = Parse({"train.py"}, {{"MUSTER_NPROC_PER_NODES", "4"},
                                {"MUSTER_TOKEN", "t"},
                                {"MUSTER_LIBCUDA", "/x"},
                                {"MUSTER_BUILD_DIR", "/b"},
                                {"MUSTER_MAX_RESTARTS", "1"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->nproc_per_node, 1);  // ignored: the default
  EXPECT_EQ(c->warnings,
            std::vector<std::string>{
                "MUSTER_NPROC_PER_NODES is not a muster variable and is ignored; did you mean "
                "MUSTER_NPROC_PER_NODE (--nproc-per-node)?"});
}

TEST(FlagsTest, MoreWorkersThanCpusWithoutGpusWarns) {
  auto c = Parse({"--nproc-per-node", "8", "train.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->warnings, std::vector<std::string>{
                             "--nproc-per-node 8 starts 8 workers on 6 CPUs and no visible GPU: "
                             "they will share the CPUs; --nproc-per-node cpu starts one per CPU"});
  EXPECT_TRUE(Parse({"--nproc-per-node", "6", "train.py"})->warnings.empty());
  // With GPUs the count is the GPUs' business.
  EXPECT_TRUE(ParseRunFlags({"--nproc-per-node", "8", "train.py"}, {}, {.cpus = 6, .gpus = 8})
                  ->warnings.empty());
}

}  // namespace
}  // namespace muster

namespace muster {
namespace {

TEST(HangFlagsTest, StragglerWindowIntervalAndShare) {
  absl::StatusOr<Config> c = Parse({"script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->straggler_window, absl::ZeroDuration());  // off by default
  EXPECT_EQ(c->straggler_interval, absl::Seconds(1));
  EXPECT_DOUBLE_EQ(c->straggler_share, 0.4);
  c = Parse({"--straggler-window", "1m", "--straggler-interval", "500ms", "--straggler-share",
             "0.5", "script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->straggler_window, absl::Minutes(1));
  EXPECT_EQ(c->straggler_interval, absl::Milliseconds(500));
  EXPECT_DOUBLE_EQ(c->straggler_share, 0.5);
  for (auto [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--straggler-interval", "10ms", "x"}, "--straggler-interval: '10ms' is below 100ms"},
           {{"--straggler-window", "soon", "x"}, "--straggler-window"},
           {{"--straggler-share", "0", "x"}, "--straggler-share: '0' must be a fraction"},
           {{"--straggler-share", "1.5", "x"}, "--straggler-share: '1.5' must be a fraction"}}) {
    absl::StatusOr<Config> bad = Parse(args);
    ASSERT_FALSE(bad.ok()) << says;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status();
  }
}

TEST(HangFlagsTest, TimeoutActionAndTheirRdzvConfKeys) {
  absl::StatusOr<Config> c = Parse({"script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hang_timeout, absl::ZeroDuration());  // off by default
  EXPECT_TRUE(c->hang_restart);
  c = Parse({"--hang-timeout", "5m", "--hang-action", "fail", "script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hang_timeout, absl::Minutes(5));
  EXPECT_FALSE(c->hang_restart);
  c = Parse({"--rdzv-conf", "hang_timeout=3s,hang_action=fail", "script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hang_timeout, absl::Seconds(3));
  EXPECT_FALSE(c->hang_restart);
  // The etcd backend carries the job-wide rule too (its coordinator runs the Job).
  c = Parse({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", "e:2379",
             "--hang-timeout", "5s", "x"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hang_timeout, absl::Seconds(5));
  for (auto [args, says] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--hang-timeout", "200ms", "x"}, "--hang-timeout: '200ms' is below 1s"},
           {{"--hang-timeout", "soon", "x"}, "--hang-timeout"},
           {{"--hang-action", "ignore", "x"}, "--hang-action: 'ignore' must be restart"},
           {{"--rdzv-conf", "hang_action=x", "x"}, "hang_action"}}) {
    absl::StatusOr<Config> bad = Parse(args);
    ASSERT_FALSE(bad.ok()) << says;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find(says), std::string::npos) << bad.status();
  }
}

TEST(FlagsTest, HealthGateFlags) {
  auto c = Parse({"--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health_check, "");
  EXPECT_EQ(c->health_check_timeout, absl::Seconds(30));
  EXPECT_EQ(c->health_min_free_bytes, uint64_t{100} << 20);
  c = Parse({"--health-check", "nvidia-smi -L", "--health-check-timeout", "5s",
             "--health-min-free-space", "0", "--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health_check, "nvidia-smi -L");
  EXPECT_EQ(c->health_check_timeout, absl::Seconds(5));
  EXPECT_EQ(c->health_min_free_bytes, 0u);
  c = Parse({"--health-min-free-space", "2GiB", "--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->health_min_free_bytes, uint64_t{2} << 30);
  ExpectError(Parse({"--health-check-timeout", "0s", "--no-python", "/bin/true"}),
              "--health-check-timeout");
  ExpectError(Parse({"--health-min-free-space", "lots", "--no-python", "/bin/true"}),
              "--health-min-free-space");
  // A spare's checks while it waits (docs/guides/spares.md): 30 s unless given, 0 off.
  c = Parse({"--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->spare_check_interval, absl::Seconds(30));
  c = Parse({"--spare-check-interval", "0", "--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->spare_check_interval, absl::ZeroDuration());
  c = Parse({"--spare-check-interval", "500ms", "--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->spare_check_interval, absl::Milliseconds(500));
  ExpectError(Parse({"--spare-check-interval", "-1s", "--no-python", "/bin/true"}),
              "--spare-check-interval");
}

}  // namespace
}  // namespace muster

namespace muster {
namespace {

TEST(StopFlagsTest, RestartGraceAndExitBarrierTimeout) {
  // Issue 30 item 6: on main --restart-grace and --exit-barrier-timeout were unknown, and
  // --rdzv-conf exit_barrier_timeout was checked and dropped.
  absl::StatusOr<Config> c = Parse({"--shutdown-timeout", "40s", "script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->RestartGrace(), absl::Seconds(40));           // --shutdown-timeout's unless given
  EXPECT_EQ(c->exit_barrier_timeout, absl::ZeroDuration());  // no limit but the job's
  c = Parse({"--shutdown-timeout", "40s", "--restart-grace", "3s", "--exit-barrier-timeout", "10m",
             "script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shutdown_timeout, absl::Seconds(40));
  EXPECT_EQ(c->RestartGrace(), absl::Seconds(3));
  EXPECT_EQ(c->exit_barrier_timeout, absl::Minutes(10));
  // torchrun's key, in seconds as torch writes it: the same setting.
  c = Parse({"--rdzv-conf", "exit_barrier_timeout=300", "script.py"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->exit_barrier_timeout, absl::Seconds(300));
  EXPECT_FALSE(Parse({"--restart-grace", "soon", "x"}).ok());
  EXPECT_FALSE(Parse({"--rdzv-conf", "exit_barrier_timeout=soon", "x"}).ok());
}

TEST(FlagsTest, QuarantineAfter) {
  auto c = Parse({"--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quarantine_after, 2);  // docs/guides/health-gate.md "Bad-node memory"
  c = Parse({"--quarantine-after", "0", "--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quarantine_after, 0);
  c = Parse({"--quarantine_after=5", "--no-python", "/bin/true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->quarantine_after, 5);
  ExpectError(Parse({"--quarantine-after", "-1", "--no-python", "/bin/true"}),
              "--quarantine-after");
  ExpectError(Parse({"--quarantine-after", "twice", "--no-python", "/bin/true"}),
              "--quarantine-after");
}

}  // namespace
}  // namespace muster

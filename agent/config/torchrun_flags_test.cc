// torchrun's command lines: every torchrun flag is accepted with its meaning or refused with
// what to use instead, argparse's forms (-r3, --nproc) work, and torch's --rdzv-conf keys.

#include "absl/strings/str_cat.h"
#include "agent/config/run_flags.h"
#include "agent/config/torchrun_compat.h"
#include "agent/lifecycle/test_helpers.h"
#include "agent/workers/worker_env.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

using testing_helpers::ExpectInvalid;

// A command line ending in a script, on a host with 6 CPUs and no GPU.
absl::StatusOr<Config> ParseTorchrun(std::vector<std::string> flags,
                                     std::map<std::string, std::string> env = {}) {
  flags.push_back("train.py");
  return ParseRunFlags(flags, env, {.cpus = 6, .gpus = 0});
}

void ExpectRefused(const std::vector<std::string>& flags, const std::string& needle,
                   std::map<std::string, std::string> env = {}) {
  SCOPED_TRACE(flags.empty() ? std::string("(env)") : flags[0]);
  ExpectInvalid(ParseTorchrun(flags, std::move(env)).status(), needle);
}

TEST(TorchrunFlagsTest, StartMethodIsCheckedAndHasNoEffect) {
  for (const char* method : {"spawn", "fork", "forkserver"}) {
    auto c = ParseTorchrun({"--start-method", method});
    ASSERT_TRUE(c.ok()) << method << ": " << c.status();
    EXPECT_EQ(BuildWorkerArgv(*c, {}), (std::vector<std::string>{"python3", "-u", "train.py"}));
  }
  EXPECT_TRUE(ParseTorchrun({"--start_method=fork"}).ok());
  ExpectRefused({"--start-method", "thread"},
                "--start-method: 'thread' must be spawn, fork or forkserver");
  ExpectRefused({}, "PET_START_METHOD: 'x' must be", {{"PET_START_METHOD", "x"}});
}

TEST(TorchrunFlagsTest, RunPathRunsTheScriptUnderPythonOverModuleAndNoPython) {
  auto c = ParseTorchrun({"-m", "--no-python", "--run-path"});
  ASSERT_TRUE(c.ok()) << c.status();  // torchrun: --run-path wins, no conflict reported
  EXPECT_FALSE(c->module);
  EXPECT_FALSE(c->no_python);
  EXPECT_EQ(BuildWorkerArgv(*c, {}), (std::vector<std::string>{"python3", "-u", "train.py"}));
  // Off: -m and --no-python still conflict.
  ExpectRefused({"-m", "--no-python"}, "--module: cannot be combined with --no-python");
  c = ParseTorchrun({"--no-python"}, {{"PET_RUN_PATH", "0"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->no_python);
}

TEST(TorchrunFlagsTest, EventLogHandlerTakesTorchrunsHandlersOnly) {
  for (const char* handler : {"null", "console", "dynamic_rendezvous"}) {
    auto c = ParseTorchrun({"--event-log-handler", handler});
    ASSERT_TRUE(c.ok()) << handler << ": " << c.status();
    EXPECT_EQ(c->event_log, "");
  }
  ExpectRefused({"--event_log_handler", "my_handler"}, "--event-log FILE");
  ExpectRefused({"--event-log-handler", "scuba"}, "'scuba' is not one of torchrun's handlers");
}

TEST(TorchrunFlagsTest, NumaBindingTakesTorchrunsFourModes) {
  const std::pair<const char*, NumaBindingMode> modes[] = {
      {"node", NumaBindingMode::kNode},
      {"socket", NumaBindingMode::kSocket},
      {"exclusive", NumaBindingMode::kExclusive},
      {"core-complex", NumaBindingMode::kCoreComplex}};
  for (const auto& [name, mode] : modes) {
    auto c = ParseTorchrun({"--numa_binding", name});
    ASSERT_TRUE(c.ok()) << name << ": " << c.status();
    EXPECT_EQ(c->numa_binding, mode);
  }
  EXPECT_EQ(ParseTorchrun({})->numa_binding, std::nullopt);
  ExpectRefused({"--numa-binding", "numa"},
                "--numa-binding: 'numa' is not a binding mode; use node, socket, exclusive or "
                "core-complex");
  ExpectRefused({}, "PET_NUMA_BINDING: 'Node' is not a binding mode",
                {{"PET_NUMA_BINDING", "Node"}});
  ExpectRefused({"--numa-binding", "node", "--bind-cores-to-rank"},
                "--numa-binding: places each worker on the CPUs near its GPU, and "
                "--bind-cores-to-rank shares out the CPUs another way: keep one of them");
  ExpectRefused({"--numa-binding", "socket", "--bind-core-list", "0-3"}, "--bind-core-list");
}

TEST(TorchrunFlagsTest, RefusedFlagsSayWhatToUseInstead) {
  ExpectRefused({"--logs-specs", "my_specs"}, "--logs-specs: names a Python LogsSpecs plugin");
  EXPECT_TRUE(ParseTorchrun({"--logs-specs=default"}).ok());  // torchrun's own, muster's layout
  ExpectRefused({"--logs_specs=x"}, "--log-dir DIR, -r/--redirects, -t/--tee");
  ExpectRefused({"--duplicate-stdout-filters", "loss,acc"}, "--duplicate-stdout-filters: ");
  ExpectRefused({"--duplicate_stderr_filters", "error"}, "--log-dir DIR and -t 3");
  ExpectRefused({}, "PET_DUPLICATE_STDOUT_FILTERS: muster does not copy",
                {{"PET_DUPLICATE_STDOUT_FILTERS", "x"}});
  ExpectRefused({"--print-completion", "bash"}, "`muster run --help` lists every flag");
}

TEST(TorchrunFlagsTest, RdzvBackendStaticC10dAndEtcd) {
  for (const char* backend : {"static", "c10d"}) {
    auto c = ParseTorchrun({"--rdzv-backend", backend});
    EXPECT_TRUE(c.ok()) << backend << ": " << c.status();
    if (c.ok()) {
      EXPECT_NE(c->rdzv_backend, rdzv::Backend::kEtcd);
      EXPECT_EQ(c->rdzv_backend, rdzv::Backend::kInProcess);  // one node, no endpoint
    }
  }
  for (const char* backend : {"etcd", "etcd-v2"}) {
    auto c = ParseTorchrun({"--rdzv-backend", backend, "--rdzv-endpoint", "e1,e2:2380"});
    ASSERT_TRUE(c.ok()) << backend << ": " << c.status();
    EXPECT_EQ(c->rdzv_backend, rdzv::Backend::kEtcd);
    std::vector<std::string> members;
    for (const Endpoint& e : c->rdzv_endpoints) members.push_back(e.ToString());
    EXPECT_EQ(members, (std::vector<std::string>{"e1:2379", "e2:2380"}));
  }
  ExpectRefused({"--rdzv-backend", "etcd"}, "etcd needs --rdzv-endpoint HOST:2379");
  ExpectRefused({"--rdzv-endpoint", "e1:1,e2:2"}, "several endpoints are for --rdzv-backend etcd");
  ExpectRefused({"--rdzv-backend", "zookeeper"}, "'zookeeper' is not a torchrun backend");
}

// Issue 14 item 2: torchrun's static form is the rendezvous at --master-addr:--master-port,
// served by node rank 0 (and only there); its workers see MASTER_PORT = --master-port.
TEST(TorchrunFlagsTest, StaticFormMeetsAtMasterAddrAndPortServedByNodeRankZero) {
  for (int rank : {0, 1}) {
    auto c = ParseTorchrun({"--nnodes=2", absl::StrCat("--node_rank=", rank),
                            "--master_addr=10.0.0.1", "--master_port=29511"});
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(c->static_rendezvous);
    EXPECT_EQ(c->rdzv_host_name, "10.0.0.1");
    EXPECT_EQ(c->rdzv_port, 29511);
    EXPECT_EQ(c->rdzv_hosting, rank == 0 ? RdzvHosting::kAlways : RdzvHosting::kNever);
  }
  auto c = ParseTorchrun({"--nnodes", "2", "--master-addr", "node0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rdzv_port, 29500);                  // torchrun's default --master-port
  EXPECT_EQ(c->rdzv_hosting, RdzvHosting::kAuto);  // no node rank: the endpoint's host serves
  // An explicit endpoint wins; nothing says where to meet without either.
  c = ParseTorchrun({"--nnodes", "2", "--master-addr", "node0", "--rdzv-endpoint", "n1:7"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->static_rendezvous);
  EXPECT_EQ(c->rdzv_host_name, "n1");
  ExpectRefused({"--nnodes", "2"}, "needs --rdzv-endpoint HOST[:PORT]");
  ExpectRefused({"--nnodes", "2", "--master-addr", "n0", "--store", "rank0"},
                "--store: rank0 makes worker rank 0 bind --master-port");
}

TEST(TorchrunFlagsTest, ShortFlagsTakeAnAttachedValue) {
  auto c = ParseTorchrun({"-r3", "-t=1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->redirects.For(0), 3);
  EXPECT_EQ(c->tee.For(4), 1);
  c = ParseTorchrun({"-r0:1,1:2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->redirects.For(1), 2);
  ExpectRefused({"-r9"}, "--redirects");
  ExpectRefused({"-mX"}, "-mX: unknown flag");  // a switch takes nothing attached
  EXPECT_TRUE(RunHelpRequested({"-r3", "--help"}));
  EXPECT_FALSE(RunHelpRequested({"-r", "--help"}));  // --help is -r's value
}

TEST(TorchrunFlagsTest, UniquePrefixesOfLongFlagsAreTheFlag) {
  auto c = ParseTorchrun({"--nproc", "4", "--max-re=3", "--stand", "--rdzv_i", "job"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->nproc_per_node, 4);
  EXPECT_EQ(c->max_restarts, 3);
  EXPECT_TRUE(c->standalone);
  EXPECT_EQ(c->run_id, "job");
  EXPECT_EQ(c->sources["nproc-per-node"], "--nproc-per-node");
  EXPECT_EQ(ParseTorchrun({"--nproc_per", "2"})->nproc_per_node, 2);
  // A whole name wins over the longer names it starts.
  c = ParseTorchrun({"--event-log", "/tmp/ev", "--debug"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->event_log, "/tmp/ev");
  EXPECT_TRUE(c->debug);
}

TEST(TorchrunFlagsTest, AmbiguousPrefixesNameTheCandidates) {
  ExpectRefused({"--log", "x"},
                "--log: is ambiguous: it could be --log-dir, --log-line-prefix-template, "
                "--log-level or --logs-specs; write more of the name");
  ExpectRefused({"--tls-c=x"}, "it could be --tls-cert or --tls-ca");
  ExpectRefused({"--he", "x"},
                "it could be --health-port, --health-check, --health-check-timeout, "
                "--health-min-free-space or --help");
  EXPECT_TRUE(RunHelpRequested({"--nproc", "4", "--help"}));
  EXPECT_TRUE(RunHelpRequested({"--hel"}));
  EXPECT_FALSE(RunHelpRequested({"--he"}));  // the parse names the candidates
}

TEST(TorchrunFlagsTest, RdzvConfTakesTorchsKeys) {
  auto c = ParseTorchrun({"--rdzv-conf",
                          "keep_alive_interval=7,keep_alive_max_attempt=5,store_type=tcp,"
                          "use_libuv=1,heartbeat_timeout=30,read_timeout=60,timeout=900"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->heartbeat_interval, absl::Seconds(7));
  EXPECT_EQ(c->heartbeat_misses, 5);
  EXPECT_EQ(c->join_timeout, absl::Seconds(900));
  ExpectRefused({"--rdzv-conf", "keep_alive_interval=0"}, "keep_alive_interval must be positive");
  ExpectRefused({"--rdzv-conf", "keep_alive_max_attempt=x"},
                "keep_alive_max_attempt: 'x' must be a positive integer");
  ExpectRefused({"--rdzv-conf", "store_type=file"}, "store_type=file: muster's rendezvous");
  ExpectRefused({"--rdzv-conf", "store_type=redis"}, "store_type: 'redis' must be tcp");
  ExpectRefused({"--rdzv-conf", "use_libuv=maybe"}, "use_libuv: 'maybe' is not a boolean");
  ExpectRefused({"--rdzv-conf", "protocol=x"}, "protocol: 'x' must be http or https");
  // etcd's TLS and user keys (agent/config/etcd_security_flags.cc), without --rdzv-backend etcd.
  for (const char* key : {"cacert", "cert", "key", "ssl_cert", "ssl_cert_key", "ca_cert"}) {
    ExpectRefused({"--rdzv-conf", std::string(key) + "=x"},
                  std::string(key) + ": is for --rdzv-backend etcd");
  }
  ExpectRefused({"--rdzv-conf", "password=x"}, "password: a password on the command line");
  ExpectRefused({"--rdzv-conf", "etcd_prefix=x"}, "etcd_prefix: 'x' must start with /");
  // Keys nobody reads: one warning (naming the known ones), and ignored, as torchrun.
  c = ParseTorchrun({"--rdzv-conf", "colour=blue,join_timeout=5,size=3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->join_timeout, absl::Seconds(5));
  ASSERT_EQ(c->warnings.size(), 1u);
  EXPECT_NE(c->warnings[0].find("--rdzv-conf: ignoring keys 'colour', 'size'"), std::string::npos)
      << c->warnings[0];
  EXPECT_NE(c->warnings[0].find("keep_alive_interval"), std::string::npos);  // the known list
}

// PyTorch's launcher tests (test/distributed/launcher/test_run.py) pass the value with the
// quotes a shell would have removed.
TEST(TorchrunFlagsTest, RdzvConfInQuotesIsTheValueInside) {
  for (const char* conf : {"'join_timeout=5,last_call_timeout=1,timeout=5'",
                           "\"join_timeout=5,last_call_timeout=1,timeout=5\""}) {
    auto c = ParseTorchrun({"--rdzv-conf", conf});
    ASSERT_TRUE(c.ok()) << conf << ": " << c.status();
    EXPECT_EQ(c->join_timeout, absl::Seconds(5)) << conf;
    EXPECT_EQ(c->last_call_timeout, absl::Seconds(1)) << conf;
    EXPECT_TRUE(c->warnings.empty()) << conf;
  }
  ExpectRefused({"--rdzv-conf", "'join_timeout=x'"}, "join_timeout: ");
}

// torchtitan's --rdzv_endpoint="localhost:0" and torchrun's --standalone form: one node
// picks a free port; several could not meet there.
TEST(TorchrunFlagsTest, PortZeroIsAnyFreePortForOneNode) {
  auto c = ParseTorchrun({"--rdzv_backend", "c10d", "--rdzv_endpoint=localhost:0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->rdzv_host_name, "");  // the in-process rendezvous: nothing to bind
  c = ParseTorchrun({"--master-port", "0"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->master_port, 0);
  ExpectRefused({"--nnodes", "2", "--rdzv-endpoint", "node0:0"},
                "--rdzv-endpoint: port 0 (any free port) works for a one-node job only, and "
                "--nnodes asks for 2 nodes");
  ExpectRefused({"--nnodes", "1:3", "--rdzv-endpoint", "node0:0"}, "asks for up to 3 nodes");
  ExpectRefused({"--nnodes", "2", "--master-addr", "n0", "--master-port", "0"},
                "port 0 (any free port) works for a one-node job only");
  ExpectRefused({"--rdzv-endpoint", "node0:x"}, "'x' is not a port (0..65535)");
}

TEST(TorchrunFlagsTest, DefaultRestartPolicyIsTorchruns) {
  auto c = ParseTorchrun({"--max_restarts=3"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->restart_policy, RestartPolicy::kOnFailure);
  c = ParseTorchrun({"--max_restarts=3", "--restart-policy", "ExitCode"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->restart_policy, RestartPolicy::kExitCode);
}

// torch.distributed.launch's --use-env: under `muster run` the no-op it is in torchrun.
TEST(TorchrunFlagsTest, UseEnvIsAcceptedByRunWithoutEffect) {
  for (const char* flag : {"--use-env", "--use_env"}) {
    auto c = ParseTorchrun({flag});
    ASSERT_TRUE(c.ok()) << flag << ": " << c.status();
    EXPECT_EQ(BuildWorkerArgv(*c, {}, 1), (std::vector<std::string>{"python3", "-u", "train.py"}));
  }
}

// `muster launch`: torch.distributed.launch's argument, spelled for the workers' torch.
TEST(TorchrunFlagsTest, LaunchPassesLocalRankUnlessUseEnv) {
  auto launch = [](std::vector<std::string> flags) {
    flags.push_back("main.py");
    return ParseRunFlags(flags, {}, {.cpus = 6, .gpus = 0}, RunForm::kLaunch);
  };
  auto c = launch({"--nproc_per_node=2"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(BuildWorkerArgv(*c, {}, 1),
            (std::vector<std::string>{"python3", "-u", "main.py", "--local-rank=1"}));
  // torch 1.x's launch module spells it so
  EXPECT_EQ(BuildWorkerArgv(*c, {.torch = TorchVersion{1, 13}}, 1).back(), "--local_rank=1");
  EXPECT_EQ(BuildWorkerArgv(*c, {.torch = TorchVersion{2, 15}}, 0).back(), "--local-rank=0");
  c = launch({"--nproc_per_node=2", "--use_env"});  // DETR's line
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(BuildWorkerArgv(*c, {}, 1), (std::vector<std::string>{"python3", "-u", "main.py"}));
  ExpectInvalid(launch({"--no-python"}).status(), "--no-python: needs --use-env");
  EXPECT_TRUE(launch({"--no-python", "--use-env"}).ok());
  EXPECT_NE(SubcommandHelp(RunSubcommand(RunForm::kLaunch)).find("--use-env"), std::string::npos);
}

TEST(TorchrunFlagsTest, RdzvConfRankIsTheNodeRankHint) {
  std::vector<std::string> two = {"--nnodes", "2", "--rdzv-endpoint", "node0:29400"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> flags = two;
    flags.insert(flags.end(), more.begin(), more.end());
    return ParseTorchrun(flags);
  };
  auto c = with({"--rdzv-conf", "rank=1"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_rank, 1);
  EXPECT_EQ(c->sources["node-rank"], "--rdzv-conf rank");
  c = with({"--rdzv-conf", "rank=1", "--node-rank", "0"});  // as torchrun: --node-rank wins
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_rank, 0);
  ExpectInvalid(with({"--rdzv-conf", "rank=2"}).status(),
                "--rdzv-conf rank: 2 is outside 0..1 (--nnodes allows 2 nodes)");
  ExpectInvalid(with({"--rdzv-conf", "rank=-1"}).status(), "--rdzv-conf rank: '-1'");
}

TEST(TorchrunFlagsTest, VirtualLocalRankNeedsADevicePerWorker) {
  auto c = ParseTorchrun({"--virtual-local-rank", "--nproc-per-node", "2"},
                         {{"CUDA_VISIBLE_DEVICES", "4,5"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->virtual_local_rank);
  ExpectRefused({"--virtual-local-rank", "--nproc-per-node", "3"},
                "--virtual-local-rank: gives each worker one device of "
                "CUDA_VISIBLE_DEVICES='4,5', which lists 2 devices for 3 workers "
                "(--nproc-per-node); start at most 2 per node or list more devices",
                {{"CUDA_VISIBLE_DEVICES", "4,5"}});
  // Unset: local rank N gets device N, as torchrun.
  EXPECT_TRUE(ParseTorchrun({"--virtual_local_rank", "--nproc-per-node", "3"}).ok());
  c = ParseTorchrun({}, {{"PET_VIRTUAL_LOCAL_RANK", "1"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->virtual_local_rank);
}

TEST(TorchrunFlagsTest, VirtualLocalDevicesFollowTorchrun) {
  EXPECT_EQ(VirtualLocalDevice({}, 3), "3");
  std::map<std::string, std::string> env = {{"CUDA_VISIBLE_DEVICES", "GPU-a, GPU-b"}};
  EXPECT_EQ(VirtualLocalDevice(env, 0), "GPU-a");
  EXPECT_EQ(VirtualLocalDevice(env, 1), "GPU-b");  // blanks stripped
  EXPECT_EQ(VirtualLocalDevice(env, 2), "");
}

TEST(TorchrunFlagsTest, HelpListsTheAcceptedAndTheRefusedFlags) {
  std::string help = RunHelp();
  for (const char* s : {"--virtual-local-rank", "--start-method V", "--run-path",
                        "--event-log-handler V", "torchrun flags muster refuses (exit 2):",
                        "--logs-specs V", "--numa-binding V", "--print-completion V"}) {
    EXPECT_NE(help.find(s), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace muster

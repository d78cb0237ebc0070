#include "agent/workers/worker_env.h"

#include <signal.h>

#include <algorithm>

#include "agent/lifecycle/test_helpers.h"
#include "agent/workers/torch_names.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

using testing_helpers::AsMap;

TEST(WorkerEnvTest, TorchrunSetPlusNodeRank) {
  Config c;
  c.max_restarts = 3;
  WorkerPlacement p{1, 1, 0, 1, 4, 4, 1, 4};
  RoundInfo r{2, "127.0.0.1", 29500, "job", false, "/tmp/e.json"};
  auto env = AsMap(BuildWorkerEnv(c, {.env_base = {{"HOME", "/root"}, {"RANK", "7"}}}, p, r));
  EXPECT_EQ(env["HOME"], "/root");
  EXPECT_EQ(env["RANK"], "1");  // a node-level RANK never leaks to workers
  EXPECT_EQ(env["LOCAL_RANK"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "4");
  EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
  EXPECT_EQ(env["TORCHELASTIC_MAX_RESTARTS"], "3");
  EXPECT_EQ(env["TORCHELASTIC_USE_AGENT_STORE"], "False");
  EXPECT_EQ(env["OMP_NUM_THREADS"], "1");
  EXPECT_EQ(env["NODE_RANK"], "0");
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
}

// The user's value under either name wins and muster adds neither (torch >= 2.11 warns
// when the old name is set).
TEST(WorkerEnvTest, AsyncErrorHandlingUnderEitherNameIsTheUsersAlone) {
  Config c;
  WorkerPlacement p{0, 0, 0, 1, 1, 1, 0, 1};
  auto env =
      AsMap(BuildWorkerEnv(c, {.env_base = {{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "3"}}}, p, {}));
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "3");
  EXPECT_EQ(env.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);
  env = AsMap(BuildWorkerEnv(c, {.env_base = {{"NCCL_ASYNC_ERROR_HANDLING", "0"}}}, p, {}));
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "0");
  EXPECT_EQ(env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);
}

// Issue 28: each renamed variable under the name the workers' torch reads (torch 2.x warns
// about the old one, 1.x reads nothing else); both when that torch is unknown.
TEST(WorkerEnvTest, AsyncErrorHandlingUnderTheNameTheWorkersTorchReads) {
  Config c;
  WorkerPlacement p{0, 0, 0, 1, 1, 1, 0, 1};
  auto env = AsMap(BuildWorkerEnv(c, {.torch = TorchVersion{2, 15}}, p, {}));
  EXPECT_EQ(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env.count("NCCL_ASYNC_ERROR_HANDLING"), 0u);
  env = AsMap(BuildWorkerEnv(c, {.torch = TorchVersion{1, 13}}, p, {}));
  EXPECT_EQ(env["NCCL_ASYNC_ERROR_HANDLING"], "1");
  EXPECT_EQ(env.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"), 0u);
}

// torchrun 2.x exports its --signals-to-handle (launcher/api.py, launch_agent).
TEST(WorkerEnvTest, SignalsToHandleAsTorchrunSetsThem) {
  Config c;
  c.signals_to_handle = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  WorkerPlacement p{0, 0, 0, 1, 1, 1, 0, 1};
  auto env = AsMap(
      BuildWorkerEnv(c, {.env_base = {{"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGUSR2"}}}, p, {}));
  EXPECT_EQ(env["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  c.signals_to_handle = {SIGUSR1};
  EXPECT_EQ(AsMap(BuildWorkerEnv(c, {}, p, {}))["TORCHELASTIC_SIGNALS_TO_HANDLE"], "SIGUSR1");
}

TEST(WorkerEnvTest, TorchVersionsParse) {
  auto v = ParseTorchVersion("2.15.0+cu132");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->major, 2);
  EXPECT_EQ(v->minor, 15);
  v = ParseTorchVersion("1.13.0a0");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->minor, 13);
  v = ParseTorchVersion("2.6a0");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->minor, 6);
  for (const char* bad : {"", "2", "x.1", "2.x", "torch"}) {
    EXPECT_FALSE(ParseTorchVersion(bad).has_value()) << bad;
  }
  EXPECT_TRUE((TorchVersion{2, 10}).AtLeast(2, 2));
  EXPECT_FALSE((TorchVersion{1, 13}).AtLeast(2, 0));
}

TEST(WorkerEnvTest, RendezvousTokenNeverReachesWorkers) {
  Config c;
  WorkerPlacement p{0, 0, 0, 1, 1, 1, 0, 1};
  auto env = AsMap(
      BuildWorkerEnv(c, {.env_base = {{"MUSTER_TOKEN", "s3cret"}, {"HOME", "/root"}}}, p, {}));
  EXPECT_EQ(env.count("MUSTER_TOKEN"), 0u);
  EXPECT_EQ(env["HOME"], "/root");
}

TEST(WorkerEnvTest, OmpKeptWhenSetOrSingleWorker) {
  Config c;
  WorkerPlacement one{0, 0, 0, 1, 1, 1, 0, 1};
  EXPECT_EQ(AsMap(BuildWorkerEnv(c, {}, one, {})).count("OMP_NUM_THREADS"), 0u);
  WorkerPlacement two{0, 0, 0, 1, 2, 2, 0, 2};
  EXPECT_EQ(AsMap(BuildWorkerEnv(c, {.env_base = {{"OMP_NUM_THREADS", "8"}}}, two,
                                 {}))["OMP_NUM_THREADS"],
            "8");
}

TEST(WorkerEnvTest, PythonUnbufferedUnlessTheUserSetIt) {
  Config c;
  WorkerPlacement p{0, 0, 0, 1, 1, 1, 0, 1};
  EXPECT_EQ(AsMap(BuildWorkerEnv(c, {}, p, {}))["PYTHONUNBUFFERED"], "1");
  for (const char* user : {"0", ""}) {
    auto env = AsMap(BuildWorkerEnv(c, {.env_base = {{"PYTHONUNBUFFERED", user}}}, p, {}));
    EXPECT_EQ(env["PYTHONUNBUFFERED"], user);
  }
}

// torchrun's --virtual-local-rank: LOCAL_RANK=0, and the worker's own entry of the agent's
// CUDA_VISIBLE_DEVICES (else its local rank); the other variables keep the real placement.
TEST(WorkerEnvTest, VirtualLocalRankNarrowsTheDevicesToTheWorkersOwn) {
  Config c;
  WorkerPlacement p{1, 5, 1, 2, 4, 8, 5, 8};
  auto plain = AsMap(BuildWorkerEnv(c, {.env_base = {{"CUDA_VISIBLE_DEVICES", "4,5,6,7"}}}, p, {}));
  EXPECT_EQ(plain["LOCAL_RANK"], "1");
  EXPECT_EQ(plain["CUDA_VISIBLE_DEVICES"], "4,5,6,7");
  c.virtual_local_rank = true;
  auto env = AsMap(BuildWorkerEnv(c, {.env_base = {{"CUDA_VISIBLE_DEVICES", "4,5,6,7"}}}, p, {}));
  EXPECT_EQ(env["LOCAL_RANK"], "0");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "5");
  EXPECT_EQ(env["RANK"], "5");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(AsMap(BuildWorkerEnv(c, {}, p, {}))["CUDA_VISIBLE_DEVICES"], "1");
}

TEST(WorkerEnvTest, Argv) {
  Config c;
  c.command = {"train.py", "--lr", "1"};
  EXPECT_EQ(BuildWorkerArgv(c, {}),
            (std::vector<std::string>{"python3", "-u", "train.py", "--lr", "1"}));
  c.module = true;
  EXPECT_EQ(BuildWorkerArgv(c, {})[2], "-m");
  c.module = false;
  c.no_python = true;
  EXPECT_EQ(BuildWorkerArgv(c, {})[0], "train.py");
}

TEST(WorkerEnvTest, Prefix) {
  WorkerPlacement p{3, 11, 2, 4, 4, 16, 11, 16};
  EXPECT_EQ(ExpandPrefix("[${role_name}${local_rank}]:", "trainer", p, "h"), "[trainer3]:");
  EXPECT_EQ(ExpandPrefix("${hostname}/${rank}|", "x", p, "node7"), "node7/11|");
}

}  // namespace
}  // namespace muster

#include "agent/flags.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

const HostInfo kHost{/*cpus=*/6, /*gpus=*/0};

absl::StatusOr<Config> Parse(std::vector<std::string> args,
                             std::map<std::string, std::string> env = {}) {
  return ParseRunFlags(args, env, kHost);
}

void ExpectError(const absl::StatusOr<Config>& c, const std::string& needle) {
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(c.status().message()).find(needle), std::string::npos)
      << c.status().message();
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

TEST(FlagsTest, NprocKinds) {
  EXPECT_EQ(Parse({"--nproc-per-node", "cpu", "--no-python", "true"})->nproc_per_node, 6);
  EXPECT_EQ(Parse({"--nproc-per-node", "auto", "--no-python", "true"})->nproc_per_node, 6);
  ExpectError(Parse({"--nproc-per-node", "gpu", "--no-python", "true"}), "no GPU");
  EXPECT_EQ(
      ParseRunFlags({"--nproc-per-node", "gpu", "--no-python", "true"}, {}, {6, 8})->nproc_per_node,
      8);
}

TEST(FlagsTest, BadInputNamesTheFlagOrVariable) {
  ExpectError(Parse({"--nproc-per-node", "abc", "--no-python", "true"}), "--nproc-per-node");
  ExpectError(Parse({"--nnodes", "3:2", "--no-python", "true"}), "--nnodes");
  ExpectError(Parse({"--max-restarts", "-1", "--no-python", "true"}), "--max-restarts");
  ExpectError(Parse({"--bogus", "--no-python", "true"}), "--bogus");
  ExpectError(Parse({"missing_script.py"}), "missing_script.py");
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
  auto c = ParseRunFlags({"--no-python", "true"}, env, {4, 0});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 3);  // PET_NNODES, not the pod-level WORLD_SIZE of 6
  EXPECT_EQ(c->nproc_per_node, 2);
  EXPECT_EQ(c->node_rank, 0);
  EXPECT_EQ(c->rdzv_host_name, "job-m");
  EXPECT_EQ(c->rdzv_port, 23456);
  EXPECT_EQ(c->rdzv_hosting, "true");  // rank 0 hosts the rendezvous
  EXPECT_NE(c->convention.find("Kubeflow"), std::string::npos);
}

TEST(ConventionsTest, VolcanoAndT9kWorldSizeIsNodeCount) {
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "m"}, {"MASTER_PORT", "23456"}, {"WORLD_SIZE", "4"}, {"RANK", "2"}};
  auto c = ParseRunFlags({"--nproc-per-node", "8", "--no-python", "true"}, env, {4, 0});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 4);
  EXPECT_EQ(c->node_rank, 2);
  EXPECT_EQ(c->rdzv_hosting, "auto");
  EXPECT_EQ(c->nproc_per_node, 8);
}

TEST(ConventionsTest, FlagsWinOverConventions) {
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", "m"}, {"WORLD_SIZE", "4"}, {"RANK", "2"}, {"JOB_COMPLETION_INDEX", "3"}};
  auto c = ParseRunFlags(
      {"--nnodes", "2", "--node-rank", "1", "--rdzv-endpoint", "x:1", "--no-python", "true"}, env,
      {4, 0});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->max_nodes, 2);
  EXPECT_EQ(c->node_rank, 1);
  EXPECT_EQ(c->rdzv_host_name, "x");
}

TEST(ConventionsTest, IndexedJobGivesRankAndRankOutsideNodesIsNamed) {
  auto c = ParseRunFlags({"--nnodes", "4", "--rdzv-endpoint", "job-0.svc", "--no-python", "true"},
                         {{"JOB_COMPLETION_INDEX", "3"}}, {4, 0});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->node_rank, 3);
  auto bad = ParseRunFlags({"--no-python", "true"},
                           {{"MASTER_ADDR", "m"}, {"WORLD_SIZE", "2"}, {"RANK", "5"}}, {4, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("RANK"), std::string::npos);
}

}  // namespace
}  // namespace muster

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

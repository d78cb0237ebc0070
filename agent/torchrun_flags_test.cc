// torchrun's command lines: argparse's forms of a flag (-r3, --nproc) work.

#include "agent/run_flags.h"
#include "agent/test_helpers.h"
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
                "--log: is ambiguous: it could be --log-dir, --log-line-prefix-template or "
                "--log-level; write more of the name");
  ExpectRefused({"--tls-c=x"}, "it could be --tls-cert or --tls-ca");
  ExpectRefused({"--he", "x"}, "it could be --health-port or --help");
  EXPECT_TRUE(RunHelpRequested({"--nproc", "4", "--help"}));
  EXPECT_TRUE(RunHelpRequested({"--hel"}));
  EXPECT_FALSE(RunHelpRequested({"--he"}));  // the parse names the candidates
}

}  // namespace
}  // namespace muster

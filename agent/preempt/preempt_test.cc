// The preemption notice's pieces (docs/guides/preemption.md): its flags, the worker's
// MUSTER_PREEMPTED variable, and delivery (file first, signal only to a worker that
// catches it), against real processes.
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "agent/config/flag_parsers.h"
#include "agent/config/run_flags.h"
#include "agent/lifecycle/test_helpers.h"
#include "agent/preempt/preempt_notice.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

absl::StatusOr<Config> ParsePreemptFlags(std::vector<std::string> args) {
  args.push_back("train.py");
  return ParseRunFlags(args, {}, HostInfo{.cpus = 4, .gpus = 0});
}

TEST(PreemptFlagsTest, DefaultsSignalNamesNoneAndGrace) {
  absl::StatusOr<Config> c = ParsePreemptFlags({});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->preempt_signal, SIGUSR1);
  EXPECT_EQ(c->preempt_grace, absl::Seconds(20));
  EXPECT_EQ(c->preempt_file, "");
  c = ParsePreemptFlags(
      {"--preempt-signal", "SIGUSR2", "--preempt-grace=5s", "--preempt_file", "/tmp/x/notice"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->preempt_signal, SIGUSR2);
  EXPECT_EQ(c->preempt_grace, absl::Seconds(5));
  EXPECT_EQ(c->preempt_file, "/tmp/x/notice");
  EXPECT_EQ(*ParsePreemptSignal("none"), 0);
  EXPECT_EQ(*ParsePreemptSignal("USR1"), SIGUSR1);
  EXPECT_EQ(*ParsePreemptSignal("10"), 10);
  EXPECT_EQ(ParseRunFlags({"train.py"}, {{"MUSTER_PREEMPT_SIGNAL", "none"}},
                          HostInfo{.cpus = 4, .gpus = 0})
                ->preempt_signal,
            0);
}

TEST(PreemptFlagsTest, BadValuesNameTheFlagAndTheFix) {
  testing_helpers::ExpectInvalid(ParsePreemptFlags({"--preempt-signal", "SIGFOO"}).status(),
                                 "--preempt-signal");
  testing_helpers::ExpectInvalid(ParsePreemptFlags({"--preempt-signal", "SIGFOO"}).status(),
                                 "SIGUSR1, or none");
  testing_helpers::ExpectInvalid(ParsePreemptFlags({"--preempt-signal", "SIGKILL"}).status(),
                                 "cannot be caught");
  testing_helpers::ExpectInvalid(ParsePreemptFlags({"--preempt-grace", "soon"}).status(),
                                 "--preempt-grace");
}

TEST(PreemptNoticeTest, WorkersGetTheFileInTheirEnvironment) {
  std::vector<std::string> env = {"A=1", "MUSTER_PREEMPTED=old", "Z=2"};
  AddPreemptEnv("/run/attempt_0/1", &env);
  EXPECT_EQ(testing_helpers::AsMap(env)["MUSTER_PREEMPTED"], "/run/attempt_0/1/preempted");
  EXPECT_EQ(env.size(), 3u);
  std::vector<std::string> fresh = {"A=1", "Z=2"};
  AddPreemptEnv("/w", &fresh);
  EXPECT_EQ(fresh, (std::vector<std::string>{"A=1", "MUSTER_PREEMPTED=/w/preempted", "Z=2"}));
}

// A child that catches SIGUSR1 (exits 42 on it) or not (SIGUSR1 would kill it); it tells
// the parent through a pipe once its disposition is set.
pid_t Child(bool catches, int ready_fd) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  // A failed assertion leaves the test before it kills the children: they die with it
  // rather than hold ctest's output pipe open forever.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (catches) signal(SIGUSR1, [](int) { _exit(42); });
  char c = 'r';
  (void)!write(ready_fd, &c, 1);
  for (;;) pause();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(PreemptNoticeTest, FileFirstThenTheSignalOnlyToWorkersThatCatchIt) {
  char tmpl[] = "/tmp/preempt_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(system(("mkdir -p " + dir + "/0 " + dir + "/1 " + dir + "/2").c_str()), 0);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  pid_t catcher = Child(true, p[1]);
  pid_t deaf = Child(false, p[1]);
  // One byte from each child, in one read or two.
  char buf[2];
  for (size_t got = 0; got < sizeof(buf);) {
    ssize_t n = read(p[0], buf + got, sizeof(buf) - got);
    ASSERT_GT(n, 0) << strerror(errno);
    got += n;
  }
  EXPECT_TRUE(CatchesSignal(catcher, SIGUSR1));
  EXPECT_FALSE(CatchesSignal(deaf, SIGUSR1));
  std::vector<WorkerView> workers(3);
  workers[0] = {.placement = {.local_rank = 0, .rank = 0}, .pid = catcher, .dir = dir + "/0"};
  workers[1] = {.placement = {.local_rank = 1, .rank = 1}, .pid = deaf, .dir = dir + "/1"};
  workers[2] = {.placement = {.local_rank = 2, .rank = 2},
                .pid = 1,
                .status = ExitStatus{.exit_code = 0},
                .dir = dir + "/2"};  // ended: no file, no signal
  NoticeDelivery d = DeliverPreemptNotice(workers, SIGUSR1, "spot notice");
  EXPECT_EQ(d.running, 2);
  EXPECT_EQ(d.signalled, 1);
  EXPECT_EQ(d.listening, 1);
  int status = 0;
  ASSERT_EQ(waitpid(catcher, &status, 0), catcher);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 42) << status;
  EXPECT_EQ(ReadAll(dir + "/0/preempted"), "spot notice\n");
  EXPECT_EQ(ReadAll(dir + "/1/preempted"), "spot notice\n");
  EXPECT_EQ(access((dir + "/2/preempted").c_str(), F_OK), -1);
  // The deaf worker still runs: SIGUSR1 would have killed it.
  EXPECT_EQ(waitpid(deaf, &status, WNOHANG), 0);
  // --preempt-signal none: everyone running reads the file and is waited for.
  workers.resize(2);
  workers[0].status = ExitStatus{.exit_code = 42};
  d = DeliverPreemptNotice(workers, 0, "drained");
  EXPECT_EQ(d.running, 1);
  EXPECT_EQ(d.listening, 1);
  EXPECT_EQ(d.signalled, 0);
  EXPECT_FALSE(AllWorkersEnded(workers));
  kill(deaf, SIGKILL);
  waitpid(deaf, &status, 0);
  close(p[0]);
  close(p[1]);
  ASSERT_EQ(system(("rm -rf " + dir).c_str()), 0);
}

}  // namespace
}  // namespace muster

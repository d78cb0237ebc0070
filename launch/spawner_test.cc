#include "launch/spawner.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace muster {
namespace {

std::vector<std::string> Env() { return {"PATH=/usr/bin:/bin"}; }

int WaitFor(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return status;
}

TEST(SpawnerTest, RunsInOwnSessionWithGivenEnv) {
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  SpawnSpec spec;
  spec.argv = {"sh", "-c", "echo $FOO $(ps -o sid= -p $$)"};
  spec.env = {"PATH=/usr/bin:/bin", "FOO=bar"};
  spec.fds = {{fds[1], 1}};
  absl::StatusOr<pid_t> pid = Spawn(spec);
  ASSERT_TRUE(pid.ok()) << pid.status();
  close(fds[1]);
  char buf[128] = {};
  ssize_t n = 0, total = 0;
  while ((n = read(fds[0], buf + total, sizeof(buf) - 1 - total)) > 0) total += n;
  close(fds[0]);
  EXPECT_EQ(WEXITSTATUS(WaitFor(*pid)), 0);
  EXPECT_EQ(std::string(buf), "bar " + std::to_string(*pid) + "\n");
}

TEST(SpawnerTest, MissingCommandIsNotFound) {
  SpawnSpec spec;
  spec.argv = {"definitely-not-a-command-muster"};
  spec.env = Env();
  absl::StatusOr<pid_t> pid = Spawn(spec);
  ASSERT_FALSE(pid.ok());
  EXPECT_TRUE(absl::IsNotFound(pid.status()));
  EXPECT_EQ(ExecFailureExitCode(pid.status()), 127);
}

TEST(SpawnerTest, NotExecutableIs126) {
  char path[] = "/tmp/muster_noexec_XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, "#!/bin/sh\n", 10), 10);
  close(fd);
  SpawnSpec spec;
  spec.argv = {path};
  spec.env = Env();
  absl::StatusOr<pid_t> pid = Spawn(spec);
  unlink(path);
  ASSERT_FALSE(pid.ok());
  EXPECT_EQ(ExecFailureExitCode(pid.status()), 126) << pid.status();
}

TEST(SpawnerTest, SignalMaskAndDispositionsAreReset) {
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  ASSERT_EQ(sigprocmask(SIG_BLOCK, &set, &old), 0);
  signal(SIGPIPE, SIG_IGN);
  SpawnSpec spec;
  // The child's blocked and ignored masks (hex) must both be empty.
  spec.argv = {"sh", "-c",
               "grep -E '^Sig(Blk|Ign)' /proc/self/status | grep -v "
               "'0000000000000000' && exit 1 || exit 0"};
  spec.env = Env();
  absl::StatusOr<pid_t> pid = Spawn(spec);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  signal(SIGPIPE, SIG_DFL);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(WEXITSTATUS(WaitFor(*pid)), 0);
}

// Reads `fd` to EOF.
std::string ReadAll(int fd) {
  std::string out;
  char buf[256];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// Descriptors the agent inherited from its caller are not close-on-exec (a shell's fd 251,
// a CI runner's pipes); a worker must not hold them: only 0, 1, 2 and what the spec passes.
TEST(SpawnerTest, OnlyStdioAndTheSpecsFdsReachTheChild) {
  // No O_CLOEXEC on any of them: as a caller's fds arrive.
  int null_fd = open("/dev/null", O_RDONLY);
  ASSERT_GE(null_fd, 0);
  ASSERT_EQ(dup2(null_fd, 251), 251);  // inherited, not passed on
  ASSERT_EQ(dup2(null_fd, 250), 250);  // passed on as itself (from == to)
  int out[2], passed[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  ASSERT_EQ(pipe(passed), 0);
  SpawnSpec spec;
  // The shell's own table, listed by its child `ls` (`; true`: the shell waits instead of
  // exec'ing ls, whose directory fd would be listed too).
  spec.argv = {"sh", "-c", "ls -v /proc/$$/fd; true"};
  spec.env = Env();
  spec.fds = {{out[1], 1}, {passed[1], 7}, {250, 250}};
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(out[1]);
  close(passed[1]);
  ASSERT_TRUE(pid.ok()) << pid.status();
  std::string listed = ReadAll(out[0]);
  EXPECT_EQ(WEXITSTATUS(WaitFor(*pid)), 0);
  EXPECT_EQ(listed, "0\n1\n2\n7\n250\n");
  for (int fd : {out[0], passed[0], null_fd, 250, 251}) close(fd);
}

// --numa-binding's two settings, read back by the child from its own /proc entries: the
// CPU list and the memory policy numa_maps shows for a mapping without its own policy.
TEST(SpawnerTest, CpuAffinityAndPreferredMemoryNodeReachTheChild) {
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  SpawnSpec spec;
  spec.argv = {"sh", "-c",
               "grep Cpus_allowed_list /proc/self/status; head -n1 /proc/self/numa_maps "
               "| cut -d' ' -f2"};
  spec.env = Env();
  spec.fds = {{out[1], 1}};
  spec.cpus = {0};
  spec.preferred_memory_node = 0;
  absl::StatusOr<pid_t> pid = Spawn(spec);
  close(out[1]);
  ASSERT_TRUE(pid.ok()) << pid.status();
  std::string got = ReadAll(out[0]);
  close(out[0]);
  EXPECT_EQ(WEXITSTATUS(WaitFor(*pid)), 0);
  EXPECT_EQ(got, "Cpus_allowed_list:\t0\nprefer:0\n");

  // Unset, the agent's own policy (the default) is inherited.
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  spec.fds = {{out[1], 1}};
  spec.cpus.clear();
  spec.preferred_memory_node = -1;
  pid = Spawn(spec);
  close(out[1]);
  ASSERT_TRUE(pid.ok()) << pid.status();
  got = ReadAll(out[0]);
  close(out[0]);
  EXPECT_EQ(WEXITSTATUS(WaitFor(*pid)), 0);
  EXPECT_NE(got.find("\ndefault\n"), std::string::npos) << got;
}

TEST(SpawnerTest, ForkFailuresForWantOfProcessesAreTransient) {
  // Spawn's clone() EAGAIN (pids cgroup full, ulimit -u) and ENOMEM; the real one is
  // driven in tests/integration/test_exit_paths.py.
  EXPECT_TRUE(IsTransientSpawnFailure(absl::UnavailableError("fork failed")));
  EXPECT_TRUE(IsTransientSpawnFailure(absl::ResourceExhaustedError("fork failed")));
  EXPECT_EQ(SpawnFailureExitCode(absl::UnavailableError("fork failed")), 138);
  EXPECT_EQ(SpawnFailureExitCode(absl::NotFoundError("no such file")), 127);
  EXPECT_EQ(SpawnFailureExitCode(absl::PermissionDeniedError("not executable")), 126);
  EXPECT_FALSE(IsTransientSpawnFailure(absl::PermissionDeniedError("not executable")));
}

TEST(SpawnerTest, ResolveExecutable) {
  EXPECT_EQ(*ResolveExecutable("sh", "/nonexistent:/bin"), "/bin/sh");
  EXPECT_TRUE(absl::IsNotFound(ResolveExecutable("/no/such", "/bin").status()));
}

}  // namespace
}  // namespace muster

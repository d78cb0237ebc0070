#include "launch/exit_status.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace muster {
namespace {

ExitStatus RunAndWait(void (*child)()) {
  pid_t pid = fork();
  if (pid == 0) child();
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  return ExitStatus::FromWaitStatus(status);
}

TEST(ExitStatusTest, ExitCodeIsKept) {
  ExitStatus s = RunAndWait([] { _exit(3); });
  EXPECT_EQ(s.code(), 3);
  EXPECT_EQ(s.Describe(), "exit 3");
  EXPECT_FALSE(s.success());
}

TEST(ExitStatusTest, SignalBecomes128PlusN) {
  ExitStatus s = RunAndWait([] {
    signal(SIGTERM, SIG_DFL);
    raise(SIGTERM);
    _exit(0);
  });
  EXPECT_EQ(s.signal, SIGTERM);
  EXPECT_EQ(s.code(), 143);
  EXPECT_EQ(s.Describe(), "signal 15 (SIGTERM)");
}

TEST(SignalNameTest, NamesAndParsing) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(*ParseSignal("SIGTERM"), SIGTERM);
  EXPECT_EQ(*ParseSignal("int"), SIGINT);
  EXPECT_EQ(*ParseSignal("9"), SIGKILL);
  EXPECT_FALSE(ParseSignal("SIGNOPE").ok());
  EXPECT_FALSE(ParseSignal("0").ok());
  EXPECT_FALSE(ParseSignal("999").ok());
}

}  // namespace
}  // namespace muster

#include "launch/process_tree.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "gtest/gtest.h"

namespace muster {
namespace {

bool Contains(const std::vector<pid_t>& v, pid_t p) {
  return std::find(v.begin(), v.end(), p) != v.end();
}

// A session leader whose child moved to a process group of its own: the group signal does
// not reach the child, the session scan must.
TEST(ProcessTreeTest, FindSessionMembersFindsMembersOutsideTheLeadersGroup) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t leader = fork();
  ASSERT_GE(leader, 0);
  if (leader == 0) {
    setsid();
    pid_t child = fork();
    if (child == 0) {
      setpgid(0, 0);
      if (write(ready[1], &child, 1) != 1) _exit(1);
      pause();
      _exit(0);
    }
    pause();
    _exit(0);
  }
  char byte;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);  // the grandchild is in its own group now
  std::vector<pid_t> members = FindSessionMembers({leader});
  EXPECT_TRUE(Contains(members, leader));
  EXPECT_EQ(members.size(), 2u) << "the leader and its regrouped child";
  EXPECT_FALSE(Contains(members, getpid()));
  EXPECT_TRUE(FindSessionMembers({}).empty());
  for (pid_t p : members) kill(p, SIGKILL);
  int status;
  ASSERT_EQ(waitpid(leader, &status, 0), leader);
  close(ready[0]);
  close(ready[1]);
}

}  // namespace
}  // namespace muster

#include "agent/lifecycle/remove_tree.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace muster {
namespace {

void Touch(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(fd, 0) << path;
  close(fd);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST(RemoveTreeTest, RemovesARunDirectoryButNotWhatALinkPointsTo) {
  char tmpl[] = "/tmp/remove_tree_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string base = tmpl;
  std::string outside = base + "/outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0700), 0);
  Touch(outside + "/keep");

  // The shape the agent makes: run/attempt_N/<rank>, a few with files, plus a link.
  std::string run = base + "/run_abc";
  ASSERT_EQ(mkdir(run.c_str(), 0700), 0);
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::string a = run + "/attempt_" + std::to_string(attempt);
    ASSERT_EQ(mkdir(a.c_str(), 0755), 0);
    for (int rank = 0; rank < 8; ++rank) {
      std::string r = a + "/" + std::to_string(rank);
      ASSERT_EQ(mkdir(r.c_str(), 0755), 0);
      if (rank % 3 == 0) Touch(r + "/stdout.log");
    }
  }
  ASSERT_EQ(symlink(outside.c_str(), (run + "/link").c_str()), 0);

  EXPECT_TRUE(RemoveTree(run));
  EXPECT_FALSE(Exists(run));
  EXPECT_TRUE(Exists(outside + "/keep")) << "followed a symbolic link";
  EXPECT_TRUE(RemoveTree(run)) << "a path that is gone is removed";

  Touch(base + "/file");
  EXPECT_TRUE(RemoveTree(base + "/file"));
  EXPECT_TRUE(RemoveTree(base));
  EXPECT_FALSE(Exists(base));
}

}  // namespace
}  // namespace muster

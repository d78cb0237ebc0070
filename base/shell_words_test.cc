#include "base/shell_words.h"

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(ShellWordsTest, QuotesOnlyWhatTheShellWouldSplitOrExpand) {
  EXPECT_EQ(ShellJoin({"/usr/bin/python3", "-u", "train.py", "--lr=0.1"}),
            "/usr/bin/python3 -u train.py --lr=0.1");
  EXPECT_EQ(ShellJoin({"sh", "-c", "sleep 1; exit 3"}), "sh -c 'sleep 1; exit 3'");
  EXPECT_EQ(ShellJoin({"echo", "it's", "", "$HOME"}), "echo 'it'\\''s' '' '$HOME'");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
}

}  // namespace
}  // namespace muster

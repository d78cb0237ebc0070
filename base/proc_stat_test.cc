#include "base/proc_stat.h"

#include <unistd.h>

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(ProcStatTest, ACommandWithSpacesAndParenthesesEndsAtTheLastParenthesis) {
  // comm "(a) b) c)"; then state ppid ... utime(14)=100 stime(15)=50 cutime(16)=7
  // cstime(17)=3 ... starttime(22)=1000 vsize(23)=4096 rss(24)=3, and more fields.
  const char* text =
      "42 ((a) b) c)) D 17 1 1 0 -1 0 0 0 0 0 100 50 7 3 20 0 1 0 1000 4096 3 rest more\n";
  std::optional<ProcStat> st = ParseProcStat(text);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->state, 'D');
  EXPECT_EQ(st->ppid, 17);
  EXPECT_EQ(st->utime, 100);
  EXPECT_EQ(st->stime, 50);
  EXPECT_EQ(st->cutime, 7);
  EXPECT_EQ(st->cstime, 3);
  EXPECT_EQ(st->starttime, 1000);
  EXPECT_EQ(st->vsize, 4096);
  EXPECT_EQ(st->rss_pages, 3);
}

TEST(ProcStatTest, WhatIsNotAStatLineIsRefused) {
  EXPECT_FALSE(ParseProcStat("").has_value());
  EXPECT_FALSE(ParseProcStat("4242 (cut").has_value());
  EXPECT_FALSE(ParseProcStat("4242 (x) S 1 2").has_value());  // too few fields
  EXPECT_FALSE(
      ParseProcStat("1 (x) S one 1 1 0 -1 0 0 0 0 0 100 50 7 3 20 0 1 0 1000 4096 3").has_value());
  EXPECT_FALSE(
      ParseProcStat("1 (x) SS 1 1 1 0 -1 0 0 0 0 0 100 50 7 3 20 0 1 0 1000 4096 3").has_value());
}

TEST(ProcStatTest, ReadsItselfAndNotAProcessThatIsGone) {
  std::optional<ProcStat> self = ReadProcStat(0);
  ASSERT_TRUE(self.has_value());
  EXPECT_EQ(self->ppid, getppid());
  EXPECT_EQ(self->state, 'R');  // reading its own stat, it runs
  std::optional<ProcStat> by_pid = ReadProcStat(getpid());
  ASSERT_TRUE(by_pid.has_value());
  EXPECT_EQ(by_pid->starttime, self->starttime);
  EXPECT_FALSE(ReadProcStat(0x3fffffff).has_value());  // above pid_max's ceiling
  EXPECT_GT(ClockTicksPerSecond(), 0);
}

}  // namespace
}  // namespace muster

#include "launch/line_splitter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(LineSplitterTest, JoinsPartialLinesAcrossFeeds) {
  LineSplitter s;
  std::vector<std::string> lines;
  auto emit = [&](std::string_view l) { lines.emplace_back(l); };
  s.Feed("ab", emit);
  s.Feed("c\nde", emit);
  s.Feed("\n\nf", emit);
  EXPECT_EQ(lines, (std::vector<std::string>{"abc", "de", ""}));
  s.Finish(emit);
  EXPECT_EQ(lines.back(), "f");
}

TEST(LineSplitterTest, CutsOverlongLines) {
  LineSplitter s(4);
  std::vector<std::string> lines;
  auto emit = [&](std::string_view l) { lines.emplace_back(l); };
  s.Feed("abcdefghij\nxy", emit);
  EXPECT_EQ(lines, (std::vector<std::string>{"abcd", "efgh", "ij"}));
  s.Finish(emit);
  EXPECT_EQ(lines.back(), "xy");
}

}  // namespace
}  // namespace muster

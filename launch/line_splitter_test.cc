#include "launch/line_splitter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace muster {
namespace {

using Lines = std::vector<std::string>;

const absl::Time kStart = absl::UnixEpoch() + absl::Hours(1);

class LineSplitterTest : public testing::Test {
 protected:
  void Feed(LineSplitter& s, std::string_view data, absl::Time now = kStart) {
    s.Feed(data, now, emit_);
  }

  Lines lines_;
  LineSplitter::Emit emit_ = [this](std::string_view l) { lines_.emplace_back(l); };
};

TEST_F(LineSplitterTest, JoinsPartialLinesAcrossFeeds) {
  LineSplitter s;
  Feed(s, "ab");
  Feed(s, "c\nde");
  Feed(s, "\n\nf");
  EXPECT_EQ(lines_, (Lines{"abc", "de", ""}));
  s.Finish(emit_);
  EXPECT_EQ(lines_.back(), "f");
}

TEST_F(LineSplitterTest, CutsOverlongLines) {
  LineSplitter s(4);
  Feed(s, "abcdefghij\nxy");
  EXPECT_EQ(lines_, (Lines{"abcd", "efgh", "ij"}));
  s.Finish(emit_);
  EXPECT_EQ(lines_.back(), "xy");
}

TEST_F(LineSplitterTest, ANewlineRightAfterACutMakesNoBlankLine) {
  LineSplitter s(4);
  Feed(s, "abcd\nef\n");
  EXPECT_EQ(lines_, (Lines{"abcd", "ef"}));
}

TEST_F(LineSplitterTest, CarriageReturnEndsALineForDisplay) {
  LineSplitter s;
  // tqdm: each update starts with '\r'; the last is closed by '\n'.
  Feed(s, "\r 10%|#");
  EXPECT_TRUE(lines_.empty());
  Feed(s, "\r 20%|##\r100%|###\n");
  EXPECT_EQ(lines_, (Lines{" 10%|#", " 20%|##", "100%|###"}));
}

TEST_F(LineSplitterTest, CrLfIsOneLineEndAndBlankCrLfLinesStay) {
  LineSplitter s;
  Feed(s, "a\r\n\r\nb\r");
  Feed(s, "\n");
  EXPECT_EQ(lines_, (Lines{"a", "", "b"}));
}

TEST_F(LineSplitterTest, PartialLineIsDueAfterTheDelayFromItsFirstByte) {
  LineSplitter s(64, absl::Milliseconds(200));
  EXPECT_EQ(s.flush_deadline(), absl::InfiniteFuture());
  Feed(s, "progress", kStart);
  Feed(s, " 1", kStart + absl::Milliseconds(150));  // more bytes do not postpone it
  EXPECT_EQ(s.flush_deadline(), kStart + absl::Milliseconds(200));
  s.FlushDueAt(kStart + absl::Milliseconds(199), emit_);
  EXPECT_TRUE(lines_.empty());
  s.FlushDueAt(kStart + absl::Milliseconds(200), emit_);
  EXPECT_EQ(lines_, (Lines{"progress 1"}));
  EXPECT_EQ(s.flush_deadline(), absl::InfiniteFuture());
}

TEST_F(LineSplitterTest, RestOfAFlushedLineIsAContinuationLine) {
  LineSplitter s(64, absl::Milliseconds(200));
  Feed(s, "loss", kStart);
  s.FlushDueAt(kStart + absl::Seconds(1), emit_);
  Feed(s, " 0.5\nnext", kStart + absl::Seconds(2));
  EXPECT_EQ(lines_, (Lines{"loss", " 0.5"}));
  // The new partial waits from its own first byte.
  EXPECT_EQ(s.flush_deadline(), kStart + absl::Seconds(2) + absl::Milliseconds(200));
}

TEST_F(LineSplitterTest, NewlineAfterAFlushedPartialMakesNoBlankLine) {
  LineSplitter s(64, absl::Milliseconds(200));
  Feed(s, "done", kStart);
  s.FlushDueAt(kStart + absl::Seconds(1), emit_);
  Feed(s, "\n\n");
  EXPECT_EQ(lines_, (Lines{"done", ""}));
}

TEST_F(LineSplitterTest, CompletedLineCancelsTheFlush) {
  LineSplitter s(64, absl::Milliseconds(200));
  Feed(s, "abc", kStart);
  Feed(s, "\n", kStart + absl::Milliseconds(10));
  EXPECT_EQ(s.flush_deadline(), absl::InfiniteFuture());
  s.FlushDueAt(kStart + absl::Seconds(1), emit_);
  EXPECT_EQ(lines_, (Lines{"abc"}));
}

}  // namespace
}  // namespace muster

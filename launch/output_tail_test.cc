#include "launch/output_tail.h"

#include <algorithm>
#include <string>

#include "gtest/gtest.h"

namespace muster {
namespace {

std::string Numbered(int from, int to) {
  std::string text;
  for (int i = from; i <= to; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

TEST(OutputTailTest, EmptyWhenNothingOrOnlyBlankLinesWereWritten) {
  OutputTail tail;
  EXPECT_EQ(tail.Text(), "");
  tail.Append("\n  \n\t\n");
  EXPECT_EQ(tail.Text(), "");
}

TEST(OutputTailTest, KeepsTheLastTwentyLines) {
  OutputTail tail;
  tail.Append(Numbered(1, 30));
  std::string expected = Numbered(11, 30);
  expected.pop_back();  // no final newline
  EXPECT_EQ(tail.Text(), expected);
}

TEST(OutputTailTest, LinesSplitAcrossAppendsAreJoined) {
  OutputTail tail;
  tail.Append("Traceback (most rec");
  tail.Append("ent call last):\n  File \"x.py\"\nValueError: bo");
  tail.Append("om\n\n\n");
  EXPECT_EQ(tail.Text(), "Traceback (most recent call last):\n  File \"x.py\"\nValueError: boom");
}

TEST(OutputTailTest, APartialLastLineIsShown) {
  OutputTail tail;
  tail.Append("first\nwaiting for input: ");
  EXPECT_EQ(tail.Text(), "first\nwaiting for input: ");
}

TEST(OutputTailTest, KeepsOnlyTheLastFourKilobytes) {
  OutputTail tail;
  // 30 lines of 300 bytes (9 KB): the byte limit, not the line limit, decides.
  std::string line(299, 'a');
  for (int i = 0; i < 30; ++i) {
    line[0] = static_cast<char>('A' + i);
    tail.Append(line + "\n");
  }
  std::string text = tail.Text();
  EXPECT_LE(text.size(), OutputTail::kMaxBytes);
  // Whole lines only: the one the 4 KB cut through is left out.
  size_t lines = std::count(text.begin(), text.end(), '\n') + 1;
  EXPECT_EQ(lines, OutputTail::kMaxBytes / 300);
  EXPECT_EQ(text.substr(text.size() - 299), std::string(1, 'A' + 29) + std::string(298, 'a'));
  EXPECT_EQ(text.size(), lines * 300 - 1);
}

TEST(OutputTailTest, ALineLongerThanTheLimitKeepsItsEnd) {
  OutputTail tail;
  tail.Append("head\n");
  tail.Append(std::string(10000, 'x'));
  tail.Append("the end");
  std::string text = tail.Text();
  EXPECT_EQ(text.size(), OutputTail::kMaxBytes);
  EXPECT_EQ(text.substr(0, 4), "...x");
  EXPECT_EQ(text.substr(text.size() - 7), "the end");
}

TEST(OutputTailTest, OneBigWriteKeepsWholeLinesAfterTheCut) {
  OutputTail tail;
  tail.Append(std::string(5000, 'x') + "\nlast\n");
  EXPECT_EQ(tail.Text(), "last");
}

TEST(OutputTailTest, ACutAtALineEndDropsNothingOfTheNextLine) {
  OutputTail tail;
  std::string head(100, 'h');
  std::string body(OutputTail::kMaxBytes - 5, 'b');
  tail.Append(head + "\n" + body + "\nend\n");  // exactly kMaxBytes after the first newline
  EXPECT_EQ(tail.Text(), body + "\nend");
}

TEST(OutputTailTest, CarriageReturnShowsTheLastUpdate) {
  OutputTail tail;
  tail.Append(" 10%|#  |\r 20%|## |\r 30%|###|\r\nerror: disk full\r\n");
  EXPECT_EQ(tail.Text(), " 30%|###|\nerror: disk full");
}

TEST(OutputTailTest, BinaryBytesAreEscapedAndTheTextIsValidUtf8) {
  OutputTail tail;
  tail.Append(std::string("ok \xC3\xA9 \xFF\xFE nul:\0 esc:\x1B[31m tab:\t\n", 31));
  EXPECT_EQ(tail.Text(), "ok \xC3\xA9 \\xFF\\xFE nul:\\x00 esc:\\x1B[31m tab:\t");
}

TEST(OutputTailTest, EscapedBinaryStaysWithinTheLimit) {
  OutputTail tail;
  std::string binary;
  for (int i = 0; i < 20000; ++i) binary.push_back(static_cast<char>(0x80 + i % 64));
  tail.Append(binary);
  std::string text = tail.Text();
  EXPECT_LE(text.size(), OutputTail::kMaxBytes);
  EXPECT_EQ(text.substr(0, 3), "...");
  EXPECT_EQ(text.find_first_not_of("\\xABCDEF0123456789.", 0), std::string::npos) << text;
}

}  // namespace
}  // namespace muster

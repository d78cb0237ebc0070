#include "launch/console_writer.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kSummaryStart[] = "[muster] ";
constexpr char kSummaryEnd[] = " of output dropped while the console was blocked";

// A console nobody reads yet: a pipe shrunk to one page, so a few lines fill it.
struct Console {
  Console() {
    int fds[2];
    EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
    read_end = fds[0];
    write_end = fds[1];
    EXPECT_GE(fcntl(write_end, F_SETPIPE_SZ, 4096), 4096);
    fcntl(read_end, F_SETFL, O_NONBLOCK);
  }
  ~Console() {
    close(read_end);
    close(write_end);
  }
  // Reads until nothing arrives for `quiet`.
  std::string ReadAll(std::chrono::milliseconds quiet = std::chrono::milliseconds(300)) {
    std::string out;
    char buf[65536];
    for (;;) {
      pollfd p{read_end, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(quiet.count())) <= 0) return out;
      ssize_t n = read(read_end, buf, sizeof(buf));
      if (n <= 0) return out;
      out.append(buf, n);
    }
  }
  int read_end, write_end;
};

std::string Line(char tag, int i, size_t length) {
  std::string head = absl::StrCat("[", std::string(1, tag), "] ", i, " ");
  return head + std::string(length > head.size() ? length - head.size() : 1, tag) + "\n";
}

ConsoleWriter::Options Small(const Console& c, absl::Duration stall_after) {
  return ConsoleWriter::Options{
      .source_limit = 8 * 1024, .stall_after = stall_after, .summary_fd = c.write_end};
}

std::vector<std::string> SummaryLines(const std::string& text) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, kSummaryStart)) out.emplace_back(line);
  }
  return out;
}

TEST(ConsoleWriterTest, DropSourceNeverWaitsAndCountsWhatItDrops) {
  Console console;
  auto writer = *ConsoleWriter::Start(Small(console, absl::Seconds(30)));
  int source = writer->AddSource(console.write_end, ConsoleWriter::WhenFull::kDrop);
  const int kLines = 1000;
  auto start = Clock::now();
  for (int i = 0; i < kLines; ++i) EXPECT_TRUE(writer->Push(source, Line('a', i, 100)));
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500)) << "Push waited";
  ConsoleWriter::Dropped dropped = writer->dropped_total();
  EXPECT_GT(dropped.lines, 0u);
  EXPECT_EQ(dropped.bytes, dropped.lines * 101);

  std::string text = console.ReadAll();
  EXPECT_TRUE(writer->Drain(absl::Seconds(5)));
  text += console.ReadAll();
  int shown = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, kSummaryStart)) continue;
    ASSERT_EQ(line.size(), 100u) << line;  // whole lines only
    ++shown;
  }
  EXPECT_EQ(shown + dropped.lines, static_cast<uint64_t>(kLines));
  EXPECT_EQ(SummaryLines(text),
            std::vector<std::string>{absl::StrCat(kSummaryStart, dropped.lines, " lines (",
                                                  dropped.bytes, " bytes)", kSummaryEnd)});
}

TEST(ConsoleWriterTest, PushBackSourceLosesNothingOnASlowConsole) {
  Console console;
  auto writer = *ConsoleWriter::Start(Small(console, absl::Seconds(30)));
  int source = writer->AddSource(console.write_end);
  int i = 0;
  std::string expected;
  for (; writer->Push(source, Line('b', i, 200)); ++i) expected += Line('b', i, 200);
  expected += Line('b', i++, 200);
  EXPECT_FALSE(writer->HasSpace(source));
  std::string text;
  std::thread reader([&] { text = console.ReadAll(std::chrono::milliseconds(1000)); });
  pollfd p{writer->space_fd(), POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 5000), 1) << "no space signalled";
  EXPECT_TRUE(writer->HasSpace(source));
  for (int end = i + 100; i < end; ++i) {
    writer->Push(source, Line('b', i, 200));
    expected += Line('b', i, 200);
  }
  EXPECT_TRUE(writer->Drain(absl::Seconds(5)));
  reader.join();
  EXPECT_EQ(writer->dropped_total().lines, 0u);
  EXPECT_EQ(text, expected);
}

TEST(ConsoleWriterTest, StalledConsoleMakesPushBackSourcesDrop) {
  Console console;
  auto writer = *ConsoleWriter::Start(Small(console, absl::Milliseconds(100)));
  int source = writer->AddSource(console.write_end);
  int i = 0;
  const auto start = Clock::now();  // the writer's first write, its progress, comes after
  while (writer->Push(source, Line('c', i, 200))) ++i;
  EXPECT_FALSE(writer->HasSpace(source));
  const bool stalled = writer->Stalled();
  // Not stalled yet: no write has been stuck for 100 ms. On a machine so loaded that this
  // thread took 100 ms to get here it may be, rightly: nothing to check then.
  if (Clock::now() - start < std::chrono::milliseconds(100)) {
    EXPECT_FALSE(stalled);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // nobody reads: stuck
  EXPECT_TRUE(writer->Stalled());
  EXPECT_TRUE(writer->HasSpace(source));                   // resume reading the worker...
  EXPECT_TRUE(writer->Push(source, Line('c', ++i, 200)));  // ...and drop its lines
  EXPECT_EQ(writer->dropped_total().lines, 1u);
  EXPECT_FALSE(writer->Drain(absl::Seconds(5)));  // gives up at once: stalled
  std::string text = console.ReadAll();
  EXPECT_TRUE(writer->Drain(absl::Seconds(5)));
  text += console.ReadAll();
  EXPECT_EQ(SummaryLines(text), std::vector<std::string>{absl::StrCat(
                                    kSummaryStart, "1 line (201 bytes)", kSummaryEnd)});
}

TEST(ConsoleWriterTest, LinesOfTwoSourcesAreNeverSpliced) {
  Console console;
  auto writer = *ConsoleWriter::Start(Small(console, absl::Milliseconds(100)));
  int worker = writer->AddSource(console.write_end);
  int agent = writer->AddSource(console.write_end, ConsoleWriter::WhenFull::kDrop);
  std::string text;
  std::thread reader([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // stuck, then moving
    text = console.ReadAll(std::chrono::milliseconds(1000));
  });
  for (int i = 0; i < 400; ++i) {
    writer->Push(worker, Line('w', i, 1 + (i * 997) % 5000));
    writer->Push(agent, Line('g', i, 1 + (i * 631) % 300));
    if (!writer->HasSpace(worker)) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  // Drain() gives up at once while the console is stuck: ask until the reader has begun.
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!writer->Drain(absl::Seconds(1)) && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  reader.join();
  EXPECT_GT(writer->dropped_total().lines, 0u);
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::StartsWith(line, kSummaryStart)) continue;
    ASSERT_TRUE(absl::StartsWith(line, "[w] ") || absl::StartsWith(line, "[g] ")) << line;
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    ASSERT_EQ(parts.size(), 3u) << line;
    int i = std::stoi(parts[1]);
    char tag = line[1];
    size_t length = 1 + (i * (tag == 'w' ? 997 : 631)) % (tag == 'w' ? 5000 : 300);
    ASSERT_EQ(absl::StrCat(line, "\n"), Line(tag, i, length));
  }
}

TEST(ConsoleWriterTest, ExitNeverWaitsForAStuckConsole) {
  // Not a Console: the detached writer stays blocked in write() on this pipe after the
  // test, so its fds stay open (a reused fd number must not receive its bytes).
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  ConsoleWriter::Options options{.stall_after = absl::Milliseconds(100), .summary_fd = fds[1]};
  auto writer = *ConsoleWriter::Start(options);
  int source = writer->AddSource(fds[1]);
  writer->Push(source, std::string(256 * 1024, 'x') + "\n");
  auto start = Clock::now();
  EXPECT_FALSE(writer->Drain(absl::Seconds(10)));
  writer.reset();
  EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(1500));
}

}  // namespace
}  // namespace muster

#include "launch/error_file.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"

namespace muster {
namespace {

std::string TempFile(const std::string& content) {
  char path[] = "/tmp/muster_error_XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
  close(fd);
  return path;
}

TEST(ErrorFileTest, ReadsTorch113Shape) {
  std::string p = TempFile(
      R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback", "timestamp": "1795237180"}}})");
  auto e = ReadErrorFile(p);
  ASSERT_TRUE(e.ok());
  ASSERT_TRUE(e->has_value());
  EXPECT_EQ((*e)->message, "ValueError: boom");
  EXPECT_EQ((*e)->traceback, "Traceback");
  EXPECT_EQ((*e)->timestamp, 1795237180);
  unlink(p.c_str());
}

TEST(ErrorFileTest, ReadsStringShape) {
  std::string p = TempFile(R"({"message": "oops", "timestamp": 12})");
  auto e = ReadErrorFile(p);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->message, "oops");
  EXPECT_EQ((*e)->timestamp, 12);
  unlink(p.c_str());
}

TEST(ErrorFileTest, MissingIsNoError) {
  auto e = ReadErrorFile("/nonexistent/error.json");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->has_value());
}

TEST(ErrorFileTest, GarbageIsInvalidArgument) {
  std::string p = TempFile("{not json");
  EXPECT_EQ(ReadErrorFile(p).status().code(), absl::StatusCode::kInvalidArgument);
  unlink(p.c_str());
}

TEST(ErrorFileTest, AgentFileRoundTrips) {
  std::string p = TempFile("");
  ASSERT_TRUE(WriteAgentErrorFile(p, {"ValueError: x", "tb", 5}, 1).ok());
  auto e = ReadErrorFile(p);
  ASSERT_TRUE(e.ok() && e->has_value());
  EXPECT_EQ((*e)->message, "ValueError: x");
  EXPECT_EQ((*e)->timestamp, 5);
  unlink(p.c_str());
}

}  // namespace
}  // namespace muster

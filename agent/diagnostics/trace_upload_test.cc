// TraceUploadChunks: every file in order and in pieces, capped per node with a note.
#include "agent/diagnostics/trace_upload.h"

#include <stdlib.h>

#include <fstream>

#include "gtest/gtest.h"

namespace muster {
namespace {

std::string WriteTemp(const std::string& dir, const std::string& name, const std::string& data) {
  std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << data;
  return path;
}

TEST(TraceUploadTest, SendsEachFileInChunksThenDone) {
  char tmpl[] = "/tmp/trace_upload_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string big(rdzv::kMaxTraceChunkBytes + 5, 'b');
  std::vector<std::string> files = {WriteTemp(tmpl, "fr_0", big), WriteTemp(tmpl, "fr_1", ""),
                                    std::string(tmpl) + "/missing"};
  std::vector<rdzv::TraceChunk> chunks = TraceUploadChunks(3, tmpl, files);
  ASSERT_EQ(chunks.size(), 4u);
  EXPECT_EQ(chunks[0].file, "fr_0");
  EXPECT_EQ(chunks[0].data.size(), static_cast<size_t>(rdzv::kMaxTraceChunkBytes));
  EXPECT_EQ(chunks[1].offset, rdzv::kMaxTraceChunkBytes);
  EXPECT_EQ(chunks[1].data, "bbbbb");
  EXPECT_EQ(chunks[2].file, "fr_1");
  EXPECT_TRUE(chunks[2].data.empty());
  EXPECT_TRUE(chunks[3].done);
  EXPECT_EQ(chunks[3].round, 3);
  EXPECT_EQ(chunks[3].dir, tmpl);
  EXPECT_NE(chunks[3].note.find("missing skipped (open: No such file"), std::string::npos)
      << chunks[3].note;
}

TEST(TraceUploadTest, CapsANodeAt8MiBAndSaysWhatIsLeftOut) {
  char tmpl[] = "/tmp/trace_upload_test.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::vector<std::string> files = {
      WriteTemp(tmpl, "a", std::string(rdzv::kMaxTraceBytesPerNode - 10, 'a')),
      WriteTemp(tmpl, "b", std::string(20, 'b')), WriteTemp(tmpl, "c", "c")};
  std::vector<rdzv::TraceChunk> chunks = TraceUploadChunks(1, tmpl, files);
  int64_t total = 0;
  for (const rdzv::TraceChunk& c : chunks) total += static_cast<int64_t>(c.data.size());
  EXPECT_EQ(total, rdzv::kMaxTraceBytesPerNode);
  EXPECT_EQ(
      chunks.back().note,
      "b truncated at 10 bytes (8 MiB per node); c skipped (over 64 files or 8 MiB per node)");
}

TEST(TraceUploadTest, NoFilesIsOneDoneChunk) {
  std::vector<rdzv::TraceChunk> chunks = TraceUploadChunks(2, "/d", {});
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_TRUE(chunks[0].done);
  EXPECT_TRUE(chunks[0].note.empty());
}

}  // namespace
}  // namespace muster

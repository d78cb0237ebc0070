// TraceStore: chunks land byte for byte under <root>/round<N>/<node>/, and what the limits
// refuse is noted, not written.
#include "rendezvous/registry/trace_store.h"

#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace muster::rdzv {
namespace {

std::string TempDir() {
  char tmpl[] = "/tmp/trace_store_test.XXXXXX";
  char* dir = mkdtemp(tmpl);
  EXPECT_NE(dir, nullptr);
  return dir == nullptr ? "/tmp" : dir;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TraceStoreTest, ChunksOfEachFileLandInOrderUnderTheNodesFolder) {
  const std::string root = TempDir() + "/traces";
  TraceStore store(root, /*per_job=*/false, "srv");
  std::string binary("a\0b\xff", 4);
  store.Write("job", "h1:12:ab", {.round = 2, .file = "fr_0", .offset = 0, .data = binary});
  store.Write("job", "h1:12:ab", {.round = 2, .file = "fr_0", .offset = 4, .data = "tail"});
  store.Write("job", "h1:12:ab", {.round = 2, .file = "fr_1", .offset = 0, .data = "x"});
  TraceStore::Stored s = store.Finish("job", "h1:12:ab", 2, "fr_9 skipped");
  EXPECT_EQ(s.location, "srv:" + root + "/round2/");
  EXPECT_EQ(s.node.files, (std::vector<std::string>{"h1:12:ab/fr_0", "h1:12:ab/fr_1"}));
  EXPECT_EQ(s.node.bytes, 9);
  EXPECT_EQ(s.node.note, "fr_9 skipped");
  EXPECT_EQ(Read(root + "/round2/h1:12:ab/fr_0"), binary + "tail");
  EXPECT_EQ(Read(root + "/round2/h1:12:ab/fr_1"), "x");
}

TEST(TraceStoreTest, RefusesPathsOutOfOrderChunksAndOversizedUploadsWithANote) {
  const std::string root = TempDir();
  TraceStore store(root, /*per_job=*/true, "srv");
  store.Write("j/1", "../n", {.round = 1, .file = "../evil", .offset = 0, .data = "x"});
  store.Write("j/1", "../n", {.round = 1, .file = "f", .offset = 5, .data = "x"});
  store.Write("j/1", "../n",
              {.round = 1,
               .file = "big",
               .offset = 0,
               .data = std::string(kMaxTraceBytesPerNode + 1, 'x')});
  TraceStore::Stored s = store.Finish("j/1", "../n", 1, "");
  EXPECT_EQ(s.location, "srv:" + root + "/j_1/round1/");
  EXPECT_TRUE(s.node.files.empty());
  EXPECT_NE(s.node.note.find("../evil: not a plain file name"), std::string::npos) << s.node.note;
  EXPECT_NE(s.node.note.find("f: chunk at 5 after 0 bytes"), std::string::npos);
  EXPECT_NE(s.node.note.find("big: over 8 MiB"), std::string::npos);
  EXPECT_EQ(TracePathComponent(".."), "_..");
  EXPECT_EQ(TracePathComponent("../n"), ".._n");
}

}  // namespace
}  // namespace muster::rdzv

#include "agent/diagnostics/trace_upload.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster {
namespace {

// Up to `limit` bytes of `path` into `out`; "" or why not. Sets `more` when the file goes on.
std::string ReadUpTo(const std::string& path, int64_t limit, std::string* out, bool* more) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return absl::StrCat("open: ", std::strerror(errno));
  std::string error;
  char buf[64 << 10];
  *more = false;
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;  // a signal: read on
    if (n < 0) {
      error = absl::StrCat("read: ", std::strerror(errno));
      break;
    }
    if (n == 0) break;
    const int64_t room = limit - static_cast<int64_t>(out->size());
    out->append(buf, static_cast<size_t>(std::min<int64_t>(n, room)));
    if (n > room) {
      *more = true;
      break;
    }
  }
  close(fd);  // read-only: nothing to lose on a close error
  return error;
}

}  // namespace

std::vector<rdzv::TraceChunk> TraceUploadChunks(int round, const std::string& dir,
                                                const std::vector<std::string>& files) {
  std::vector<rdzv::TraceChunk> chunks;
  std::vector<std::string> notes;
  int64_t left = rdzv::kMaxTraceBytesPerNode;
  int sent = 0;
  for (const std::string& path : files) {
    const std::string name = path.substr(path.rfind('/') + 1);
    if (sent == rdzv::kMaxTraceFilesPerNode || left == 0) {
      notes.push_back(absl::StrCat(name, " skipped (over ", rdzv::kMaxTraceFilesPerNode,
                                   " files or 8 MiB per node)"));
      continue;
    }
    std::string data;
    bool more = false;
    if (std::string e = ReadUpTo(path, left, &data, &more); !e.empty()) {
      notes.push_back(absl::StrCat(name, " skipped (", e, ")"));
      continue;
    }
    if (more)
      notes.push_back(absl::StrCat(name, " truncated at ", data.size(), " bytes (8 MiB per node)"));
    left -= static_cast<int64_t>(data.size());
    ++sent;
    int64_t offset = 0;
    do {  // an empty file is sent too: one empty chunk
      const size_t n = std::min<size_t>(data.size() - offset, rdzv::kMaxTraceChunkBytes);
      chunks.push_back(rdzv::TraceChunk{
          .round = round, .file = name, .offset = offset, .data = data.substr(offset, n)});
      offset += static_cast<int64_t>(n);
    } while (offset < static_cast<int64_t>(data.size()));
  }
  chunks.push_back(rdzv::TraceChunk{
      .round = round, .done = true, .note = absl::StrJoin(notes, "; "), .dir = dir});
  return chunks;
}

}  // namespace muster

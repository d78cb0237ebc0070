#include "rendezvous/registry/trace_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

// mkdir -p; "" or the failing call's reason.
std::string MakeDirs(const std::string& path) {
  for (size_t at = 1; at <= path.size(); ++at) {
    if (at != path.size() && path[at] != '/') continue;
    std::string part = path.substr(0, at);
    // EEXIST: made before (by us or by another node's upload); anything else is the answer.
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::StrCat("mkdir ", part, ": ", std::strerror(errno));
    }
  }
  return "";
}

std::string AppendToFile(const std::string& path, bool truncate, const std::string& data) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | (truncate ? O_TRUNC : O_APPEND);
  int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) return absl::StrCat("open ", path, ": ", std::strerror(errno));
  std::string error;
  for (size_t done = 0; done < data.size();) {
    ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;  // a signal: write the rest
    if (n < 0) {
      error = absl::StrCat("write ", path, ": ", std::strerror(errno));
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (close(fd) != 0 && error.empty()) {
    error = absl::StrCat("close ", path, ": ", std::strerror(errno));
  }
  return error;
}

}  // namespace

std::string TracePathComponent(const std::string& name) {
  std::string out = name.substr(0, 200);
  for (char& c : out) {
    bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == ':' || c == '@' || c == '+' || c == '-';
    if (!keep) c = '_';
  }
  if (out.empty() || out == "." || out == "..") out = absl::StrCat("_", out);
  return out;
}

TraceStore::TraceStore(std::string root, bool per_job, std::string host)
    : root_(std::move(root)), per_job_(per_job), host_(std::move(host)) {}

std::string TraceStore::RoundDir(const std::string& run_id, int round) const {
  return per_job_ ? absl::StrCat(root_, "/", TracePathComponent(run_id), "/round", round)
                  : absl::StrCat(root_, "/round", round);
}

void TraceStore::Write(const std::string& run_id, const std::string& node_id,
                       const TraceChunk& chunk) {
  MutexLock lock(&mu_);
  Upload& up = uploads_[Key{run_id, node_id, chunk.round}];
  std::string refused = WriteLocked(run_id, node_id, chunk, up);
  if (refused.empty()) return;
  spdlog::warn("rendezvous: trace file {} of node {} not stored: {}", chunk.file, node_id, refused);
  if (up.notes.size() < 8) up.notes.push_back(absl::StrCat(chunk.file, ": ", refused));
}

std::string TraceStore::WriteLocked(const std::string& run_id, const std::string& node_id,
                                    const TraceChunk& chunk, Upload& up) {
  if (chunk.file.empty() || chunk.file.size() > 200 || chunk.file.find('/') != std::string::npos ||
      chunk.file == "." || chunk.file == "..") {
    return "not a plain file name";
  }
  auto size = up.sizes.find(chunk.file);
  const int64_t have = size == up.sizes.end() ? 0 : size->second;
  if (chunk.offset != have)
    return absl::StrCat("chunk at ", chunk.offset, " after ", have, " bytes");
  if (size == up.sizes.end() && static_cast<int>(up.files.size()) >= kMaxTraceFilesPerNode) {
    return absl::StrCat("more than ", kMaxTraceFilesPerNode, " files from one node");
  }
  const int64_t n = static_cast<int64_t>(chunk.data.size());
  if (up.bytes + n > kMaxTraceBytesPerNode) return "over 8 MiB from one node in one round";
  int64_t& job = job_bytes_[run_id];
  if (job + n > kMaxTraceBytesPerJob) return "over 256 MiB of traces for the job";
  const std::string dir =
      absl::StrCat(RoundDir(run_id, chunk.round), "/", TracePathComponent(node_id));
  if (std::string e = MakeDirs(dir); !e.empty()) return e;
  if (std::string e = AppendToFile(absl::StrCat(dir, "/", chunk.file), have == 0, chunk.data);
      !e.empty()) {
    return e;
  }
  if (size == up.sizes.end()) up.files.push_back(chunk.file);
  up.sizes[chunk.file] = have + n;
  up.bytes += n;
  job += n;
  return "";
}

TraceStore::Stored TraceStore::Finish(const std::string& run_id, const std::string& node_id,
                                      int round, const std::string& agent_note) {
  MutexLock lock(&mu_);
  Stored out{.location = absl::StrCat(host_, ":", RoundDir(run_id, round), "/")};
  auto it = uploads_.find(Key{run_id, node_id, round});
  std::vector<std::string> notes;
  if (!agent_note.empty()) notes.push_back(agent_note);
  if (it != uploads_.end()) {
    const std::string node_dir = TracePathComponent(node_id);
    for (const std::string& f : it->second.files) out.node.files.push_back(node_dir + "/" + f);
    out.node.bytes = it->second.bytes;
    notes.insert(notes.end(), it->second.notes.begin(), it->second.notes.end());
    uploads_.erase(it);
  }
  out.node.note = absl::StrJoin(notes, "; ");
  return out;
}

}  // namespace muster::rdzv

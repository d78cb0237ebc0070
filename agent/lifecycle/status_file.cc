#include "agent/lifecycle/status_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/errno_status.h"
#include "base/log_format.h"
#include "base/unique_fd.h"
#include "spdlog/spdlog.h"

namespace muster {

nlohmann::json FailureJson(const rdzv::Failure& f) {
  return {{"kind", rdzv::FailureKindName(f.kind)},
          {"node_id", f.node_id},
          {"host", f.host},
          {"rank", f.rank},
          {"local_rank", f.local_rank},
          {"pid", f.pid},
          {"code", f.code},
          {"what", f.what},
          {"message", f.message},
          {"stderr_tail", f.stderr_tail},
          {"restartable", f.restartable}};
}

absl::Status WriteFileAtomically(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp";
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd.valid()) return ErrnoStatus("open " + tmp, errno);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      absl::Status error = ErrnoStatus("write " + tmp, errno);
      unlink(tmp.c_str());  // a full disk: no half-written PATH.tmp is left behind
      return error;
    }
    off += n;
  }
  fd.reset();
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    absl::Status error = ErrnoStatus("rename " + tmp, errno);
    unlink(tmp.c_str());  // e.g. PATH became a directory: no PATH.tmp is left behind
    return error;
  }
  return absl::OkStatus();
}

void StatusFile::Write(const nlohmann::json& doc) {
  if (path_.empty()) return;
  absl::Status st = WriteFileAtomically(path_, doc.dump(2) + "\n");
  if (!st.ok() && !warned_) {
    warned_ = true;
    spdlog::warn("cannot write --status-file: {}", st.message());
  }
}

void WriteTerminationLog(const std::string& path, const std::string& line) {
  if (path.empty() || line.empty()) return;
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr || std::fprintf(f, "%s\n", line.c_str()) < 0 || std::fclose(f) != 0) {
    spdlog::warn("cannot write --termination-log {}: {}", path, strerror(errno));
  }
}

}  // namespace muster

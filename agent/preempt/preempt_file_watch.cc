#include "agent/preempt/preempt_file_watch.h"

#include <sys/epoll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"

namespace muster {
namespace {

constexpr size_t kMaxReason = 200;

std::string ReasonFrom(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  line = std::string(absl::StripAsciiWhitespace(line));
  if (line.size() > kMaxReason) line.resize(kMaxReason);
  for (char& c : line) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return line.empty() ? absl::StrCat("preempt file ", path, " appeared")
                      : absl::StrCat("preempt file: ", line);
}

}  // namespace

absl::StatusOr<std::unique_ptr<PreemptFileWatch>> PreemptFileWatch::Start(EventLoop* loop,
                                                                          const std::string& path,
                                                                          Callback on_appeared) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--preempt-file ", path, " names a directory; give a file path"));
  }
  UniqueFd fd(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus("inotify_init1", errno);
  if (inotify_add_watch(fd.get(), dir.c_str(), IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    return absl::InvalidArgumentError(absl::StrCat("--preempt-file ", path,
                                                   ": cannot watch its directory ", dir, ": ",
                                                   strerror(errno), "; create it first"));
  }
  std::unique_ptr<PreemptFileWatch> watch(
      new PreemptFileWatch(loop, path, std::move(name), std::move(fd), std::move(on_appeared)));
  PreemptFileWatch* self = watch.get();
  absl::Status added =
      loop->Add(self->fd_.get(), EPOLLIN, [self](uint32_t) { self->OnReadable(); });
  if (!added.ok()) return added;
  return watch;
}

PreemptFileWatch::PreemptFileWatch(EventLoop* loop, std::string path, std::string name, UniqueFd fd,
                                   Callback cb)
    : loop_(loop),
      path_(std::move(path)),
      name_(std::move(name)),
      fd_(std::move(fd)),
      on_appeared_(std::move(cb)) {}

PreemptFileWatch::~PreemptFileWatch() {
  if (fd_.valid()) loop_->Remove(fd_.get());
}

void PreemptFileWatch::OnReadable() {
  alignas(inotify_event) char buf[4096];
  bool seen = false;
  for (;;) {
    ssize_t n = read(fd_.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t off = 0; off + static_cast<ssize_t>(sizeof(inotify_event)) <= n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(buf + off);
      if (e->len > 0 && name_ == e->name) seen = true;
      off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
    }
  }
  if (!seen || fired_) return;
  fired_ = true;
  on_appeared_(ReasonFrom(path_));
}

}  // namespace muster

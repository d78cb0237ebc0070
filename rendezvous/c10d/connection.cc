#include "rendezvous/c10d/connection.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/status_macros.h"

namespace muster::c10d {
namespace {

constexpr size_t kMinReadChunk = 64 * 1024;
constexpr size_t kMaxReadChunk = 4 * 1024 * 1024;
// Buffer capacity above this is given back once the buffer is drained, so one
// large value does not pin memory on a connection for its lifetime.
constexpr size_t kKeepInputCapacity = 16 * 1024;

ssize_t RecvRetrying(int fd, char* buf, size_t len) {
  ssize_t n;
  do {
    n = ::recv(fd, buf, len, 0);
  } while (n < 0 && errno == EINTR);  // a signal is no reason to drop the peer
  return n;
}

}  // namespace

absl::StatusOr<bool> Connection::Read() {
  size_t have = in_.size();
  size_t missing = in_needed_ > have ? in_needed_ - have : 0;
  if (missing > kMinReadChunk) {
    // A large value is arriving: read straight into the input buffer (the
    // zero-fill of resize() is paid once per large request, not per read).
    size_t want = std::min(missing, kMaxReadChunk);
    in_.resize(have + want);
    ssize_t n = RecvRetrying(fd_.get(), in_.data() + have, want);
    if (n < 0) {
      int err = errno;
      in_.resize(have);
      if (err == EAGAIN || err == EWOULDBLOCK) return true;  // spurious wake-up
      return ErrnoStatus("recv", err);
    }
    in_.resize(have + static_cast<size_t>(n));
    return n > 0;
  }
  // Small requests: read into the thread's scratch chunk and keep only the bytes
  // that came, so an idle connection holds no 64 KiB buffer and no read pays for
  // zeroing one.
  thread_local std::unique_ptr<char[]> scratch(new char[kMinReadChunk]);
  ssize_t n = RecvRetrying(fd_.get(), scratch.get(), kMinReadChunk);
  if (n < 0) {
    int err = errno;
    if (err == EAGAIN || err == EWOULDBLOCK) return true;  // spurious wake-up
    return ErrnoStatus("recv", err);
  }
  in_.append(scratch.get(), static_cast<size_t>(n));
  return n > 0;
}

absl::Status Connection::ProcessInput(const std::function<absl::Status(Request&)>& handle) {
  while (!paused() && !overflowed_) {
    std::string_view buffer(in_.data() + in_pos_, in_.size() - in_pos_);
    if (buffer.size() < in_needed_) break;
    if (protocol_ == Protocol::kUnknown) {
      Detection d = DetectProtocol(buffer);
      if (d.protocol == Protocol::kUnknown) {
        in_needed_ = 5;
        break;
      }
      protocol_ = d.protocol;
      in_pos_ += d.consumed;
      in_needed_ = 1;
      continue;
    }
    ASSIGN_OR_RETURN(ParseOutcome outcome, ParseRequest(protocol_, buffer, limits_, &request_));
    if (!outcome.complete) {
      in_needed_ = outcome.size;
      break;
    }
    in_pos_ += outcome.size;
    in_needed_ = 1;
    RETURN_IF_ERROR(handle(request_));
  }
  if (in_pos_ == in_.size()) {
    in_.clear();
    if (in_.capacity() > kKeepInputCapacity) in_.shrink_to_fit();
    in_pos_ = 0;
  } else if (in_pos_ > 0) {
    in_.erase(0, in_pos_);
    in_pos_ = 0;
  }
  return absl::OkStatus();
}

void Connection::Queue(std::span<const std::string_view> parts) {
  if (overflowed_) return;
  uint64_t total = 0;
  for (std::string_view part : parts) total += part.size();
  if (total > limits_.output_hard_limit_bytes ||
      pending_output() > limits_.output_hard_limit_bytes - total) {
    overflowed_ = true;
    refused_bytes_ = total;
    refused_pending_ = pending_output();
    return;
  }
  out_.reserve(out_.size() + total);  // one allocation for a large reply
  for (std::string_view part : parts) out_.append(part.data(), part.size());
}

std::string Connection::OverflowReason() const {
  return absl::StrCat("refused a reply of ", refused_bytes_, " bytes: it would pass the ",
                      limits_.output_hard_limit_bytes, "-byte output limit (", refused_pending_,
                      " bytes not yet read by the peer)");
}

absl::Status Connection::Flush() {
  while (out_pos_ < out_.size()) {
    ssize_t n = ::send(fd_.get(), out_.data() + out_pos_, out_.size() - out_pos_, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;  // epoll tells us when to resume
      return ErrnoStatus("send", errno);
    }
    out_pos_ += static_cast<size_t>(n);
  }
  if (out_pos_ == out_.size()) {
    out_.clear();
    if (out_.capacity() > kKeepInputCapacity) out_.shrink_to_fit();
    out_pos_ = 0;
  } else if (out_pos_ > out_.size() / 2) {
    out_.erase(0, out_pos_);
    out_pos_ = 0;
  }
  return absl::OkStatus();
}

}  // namespace muster::c10d

// Owning file descriptor: closes on destruction, move-only. Not thread-safe.
#ifndef MUSTER_BASE_UNIQUE_FD_H_
#define MUSTER_BASE_UNIQUE_FD_H_

#include <unistd.h>

#include <utility>

namespace muster {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() { return std::exchange(fd_, -1); }
  // close() errors are ignored on purpose: the fd is gone either way (Linux
  // never retries close on EINTR), and there is nothing a caller could do about
  // it.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace muster

#endif  // MUSTER_BASE_UNIQUE_FD_H_

#include "launch/pidfd.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace muster {
namespace {

// One message on the watchdog socket: an op byte and a pid. The pidfd, when there is
// one, travels as ancillary data.
struct PidMessage {
  char op;
  pid_t pid;
};

// Formats a non-negative number into `out` (no snprintf: not async-signal-safe).
char* AppendNumber(char* out, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0);
  while (n > 0) *out++ = digits[--n];
  return out;
}

}  // namespace

int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

int PidfdSignal(int pidfd, int sig) {
  return static_cast<int>(syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0));
}

pid_t PidfdUnreaped(int pidfd) {
  char path[64] = "/proc/self/fdinfo/";
  *AppendNumber(path + strlen(path), pidfd) = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[512];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  const char* line = strstr(buf, "\nPid:");
  if (line == nullptr) return 0;
  const char* p = line + 5;
  while (*p == ' ' || *p == '\t') ++p;
  if (*p == '-') return 0;  // "Pid: -1": reaped
  long pid = 0;
  while (*p >= '0' && *p <= '9') pid = pid * 10 + (*p++ - '0');
  return static_cast<pid_t>(pid);
}

int SendPidAndPidfd(int socket, char op, pid_t pid, int pidfd) {
  PidMessage m{op, pid};
  iovec iov{&m, sizeof(m)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (pidfd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &pidfd, sizeof(int));
  }
  ssize_t n;
  do {
    n = sendmsg(socket, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  return n == static_cast<ssize_t>(sizeof(m)) ? 0 : -1;
}

ssize_t ReceivePidAndPidfd(int socket, char* op, pid_t* pid, int* pidfd) {
  PidMessage m{};
  iovec iov{&m, sizeof(m)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  ssize_t n;
  do {
    n = recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  *pidfd = -1;
  if (n <= 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      memcpy(pidfd, CMSG_DATA(c), sizeof(int));
  }
  *op = m.op;
  *pid = m.pid;
  return n;
}

}  // namespace muster

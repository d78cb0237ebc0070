#include "rendezvous/grpc/tcp_keepalive.h"

#include <grpc/support/sync.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/version_info.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "spdlog/spdlog.h"

static_assert(GRPC_CPP_VERSION_MAJOR == 1 && GRPC_CPP_VERSION_MINOR == 51,
              "tcp_keepalive.cc declares gRPC 1.51's socket mutator layout; check "
              "src/core/lib/iomgr/socket_mutator.h of this gRPC version and update it");

// gRPC 1.51's src/core/lib/iomgr/socket_mutator.h, which is not installed. The exported
// functions have C++ linkage there.
typedef enum {
  GRPC_FD_CLIENT_CONNECTION_USAGE,
  GRPC_FD_SERVER_LISTENER_USAGE,
  GRPC_FD_SERVER_CONNECTION_USAGE,
} grpc_fd_usage;
typedef struct {
  int fd;
  grpc_fd_usage usage;
} grpc_mutate_socket_info;
typedef struct {
  bool (*mutate_fd)(int fd, grpc_socket_mutator* mutator);
  int (*compare)(grpc_socket_mutator* a, grpc_socket_mutator* b);
  void (*destroy)(grpc_socket_mutator* mutator);
  bool (*mutate_fd_2)(const grpc_mutate_socket_info* info, grpc_socket_mutator* mutator);
} grpc_socket_mutator_vtable;
struct grpc_socket_mutator {
  const grpc_socket_mutator_vtable* vtable;
  gpr_refcount refcount;
};
void grpc_socket_mutator_init(grpc_socket_mutator* mutator,
                              const grpc_socket_mutator_vtable* vtable);

namespace muster::rdzv::grpc_internal {
namespace {

absl::Status SetInt(int fd, int level, int option, const char* name, int value) {
  if (setsockopt(fd, level, option, &value, sizeof value) != 0) {
    return absl::InternalError(
        absl::StrCat("setsockopt(", name, ", ", value, "): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// The mutator gRPC refcounts and destroys; `base` must stay the first member.
struct KeepaliveMutator {
  grpc_socket_mutator base;
  TcpKeepalive keepalive;
};

KeepaliveMutator* Self(grpc_socket_mutator* m) { return reinterpret_cast<KeepaliveMutator*>(m); }

bool MutateFd(int fd, grpc_socket_mutator* m) {
  absl::Status set = SetTcpKeepalive(fd, Self(m)->keepalive);
  // A socket without keepalive still works; only partitions are then noticed late.
  if (!set.ok()) spdlog::warn("rendezvous: TCP keepalive not set: {}", set.ToString());
  return true;
}

bool MutateFd2(const grpc_mutate_socket_info* info, grpc_socket_mutator* m) {
  if (info->usage == GRPC_FD_SERVER_LISTENER_USAGE) return true;
  return MutateFd(info->fd, m);
}

int Compare(grpc_socket_mutator* a, grpc_socket_mutator* b) {
  const TcpKeepalive& x = Self(a)->keepalive;
  const TcpKeepalive& y = Self(b)->keepalive;
  if (x.probe_interval != y.probe_interval) return x.probe_interval < y.probe_interval ? -1 : 1;
  if (x.timeout != y.timeout) return x.timeout < y.timeout ? -1 : 1;
  return 0;
}

void Destroy(grpc_socket_mutator* m) { delete Self(m); }

constexpr grpc_socket_mutator_vtable kVtable = {MutateFd, Compare, Destroy, MutateFd2};

// Starts with one reference, owned by whoever takes it (ChannelArguments).
grpc_socket_mutator* NewMutator(const TcpKeepalive& keepalive) {
  auto* m = new KeepaliveMutator;
  m->keepalive = keepalive;
  grpc_socket_mutator_init(&m->base, &kVtable);
  return &m->base;
}

class KeepaliveOption : public grpc::ServerBuilderOption {
 public:
  explicit KeepaliveOption(const TcpKeepalive& keepalive) : keepalive_(keepalive) {}
  void UpdateArguments(grpc::ChannelArguments* args) override { AddTcpKeepalive(keepalive_, args); }
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*) override {}

 private:
  const TcpKeepalive keepalive_;
};

}  // namespace

absl::Status SetTcpKeepalive(int fd, const TcpKeepalive& keepalive) {
  if (keepalive.probe_interval <= absl::ZeroDuration() ||
      keepalive.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("TCP keepalive needs a positive interval and timeout");
  }
  // Probes are timed in whole seconds; the deadline itself (TCP_USER_TIMEOUT) in ms.
  int64_t probe_s = std::clamp<int64_t>(
      absl::ToInt64Seconds(absl::Ceil(keepalive.probe_interval, absl::Seconds(1))), 1, 32767);
  int64_t timeout_ms = std::clamp<int64_t>(absl::ToInt64Milliseconds(keepalive.timeout), 1,
                                           std::numeric_limits<int>::max());
  // TCP_USER_TIMEOUT, not the count, decides when probing gives up; the count is the same
  // deadline for a kernel that ignores it.
  int64_t count = std::clamp<int64_t>((timeout_ms / 1000 + probe_s - 1) / probe_s, 1, 127);
  struct Option {
    int level, name;
    const char* text;
    int64_t value;
  };
  for (const Option& o : {Option{SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1},
                          Option{IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", probe_s},
                          Option{IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", probe_s},
                          Option{IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", count},
                          Option{IPPROTO_TCP, TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT", timeout_ms}}) {
    RETURN_IF_ERROR(SetInt(fd, o.level, o.name, o.text, static_cast<int>(o.value)));
  }
  return absl::OkStatus();
}

void AddTcpKeepalive(const TcpKeepalive& keepalive, grpc::ChannelArguments* args) {
  // The arguments take over the one reference NewMutator made (and copy it when copied).
  args->SetSocketMutator(NewMutator(keepalive));
}

void AddTcpKeepalive(const TcpKeepalive& keepalive, grpc::ServerBuilder* builder) {
  builder->SetOption(std::make_unique<KeepaliveOption>(keepalive));
}

}  // namespace muster::rdzv::grpc_internal

// Backend: what carries an agent's rendezvous, the one vocabulary that the flags (--rdzv-backend,
// the endpoint), `muster run`'s wiring and the query commands (status, stacks, drain) share
// (docs/design.md §4.3). kBackendNames is the only spelling: the flag's words are
// torchrun's (static and c10d both meet at muster's own rendezvous, etcd-v2 is etcd).
#ifndef MUSTER_RENDEZVOUS_BACKEND_H_
#define MUSTER_RENDEZVOUS_BACKEND_H_

#include <array>
#include <optional>
#include <string_view>

namespace muster::rdzv {

enum class Backend {
  kInProcess,  // one node and no endpoint: a core::Job inside the agent (local_client.h)
  kGrpc,       // muster's own rendezvous server, hosted by a node or `muster serve` (grpc/)
  kEtcd,       // etcd's members at --rdzv-endpoint, no server (etcd/, docs/guides/etcd.md)
};

// Every backend, in the order above.
inline constexpr std::array<Backend, 3> kBackends = {Backend::kInProcess, Backend::kGrpc,
                                                     Backend::kEtcd};

// The one name table. A backend's first row is its name (BackendName); rows with `flag` are
// the words --rdzv-backend takes (the in-process one is chosen, never named: one node
// without --rdzv-endpoint).
struct BackendNameRow {
  std::string_view name;
  Backend backend;
  bool flag;
};
inline constexpr BackendNameRow kBackendNames[] = {
    {"in-process", Backend::kInProcess, false}, {"c10d", Backend::kGrpc, true},
    {"static", Backend::kGrpc, true},           {"etcd", Backend::kEtcd, true},
    {"etcd-v2", Backend::kEtcd, true},
};

// "in-process", "c10d", "etcd".
const char* BackendName(Backend backend);

// The backend a --rdzv-backend word names (static, c10d, etcd, etcd-v2); nullopt for any
// other word, "in-process" included.
std::optional<Backend> ParseBackendFlag(std::string_view word);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_BACKEND_H_

// The registry (one row per rdzv::Backend) and what every backend shares.
#include <cstddef>
#include <iterator>
#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/config/flag_parsers.h"

namespace muster {
namespace {

struct BackendRow {
  rdzv::Backend backend;
  const RendezvousBackend& (*object)();
};

constexpr BackendRow kBackendTable[] = {
    {rdzv::Backend::kInProcess, InProcessBackend},
    {rdzv::Backend::kGrpc, GrpcBackend},
    {rdzv::Backend::kEtcd, EtcdBackend},
};

// A row per backend, in rdzv::kBackends' order, so that BackendFor finds every one.
static_assert([] {
  if (std::size(kBackendTable) != rdzv::kBackends.size()) return false;
  for (size_t i = 0; i < rdzv::kBackends.size(); ++i) {
    if (kBackendTable[i].backend != rdzv::kBackends[i]) return false;
  }
  return true;
}());

}  // namespace

std::string JobQuery::From(QueryCommand command) const {
  return absl::StrCat(command == QueryCommand::kDrain ? "at " : "from ", Where());
}

const RendezvousBackend& BackendFor(rdzv::Backend backend) {
  for (const BackendRow& row : kBackendTable) {
    if (row.backend == backend) return row.object();
  }
  return kBackendTable[0].object();  // unreached: every backend has a row (above)
}

absl::StatusOr<const RendezvousBackend*> BackendFromFlags(const FlagValues& values) {
  std::optional<FlagValue> word = values.Get("rdzv-backend");
  if (!word) return &BackendFor(rdzv::Backend::kGrpc);
  std::optional<rdzv::Backend> backend = rdzv::ParseBackendFlag(word->text);
  if (!backend) {
    return FlagError(word->where, absl::StrCat("'", word->text,
                                               "' must be c10d, static (muster's own "
                                               "rendezvous), etcd or etcd-v2"));
  }
  return &BackendFor(*backend);
}

}  // namespace muster

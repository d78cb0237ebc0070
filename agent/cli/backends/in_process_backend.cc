// The in-process rendezvous of a one-node job (rendezvous/local_client.h): no server, no
// sockets. Nobody outside the agent can ask it about the job; `muster stacks` without
// --rdzv-endpoint reaches the agent itself (agent/diagnostics/local_stacks.h).
#include <memory>

#include "agent/cli/backends/rendezvous_backend.h"
#include "rendezvous/local_client.h"

namespace muster {
namespace {

class InProcessRendezvousBackend : public RendezvousBackend {
 public:
  absl::Status Wire(const RunWiring& /*run*/, AgentParts& parts) const override {
    parts.rendezvous = std::make_unique<rdzv::LocalRendezvous>(parts.loop.get());
    return absl::OkStatus();
  }

  // --rdzv-backend has no word for it (rendezvous/backend.h), so no command gets here.
  absl::StatusOr<std::unique_ptr<JobQuery>> Query(const FlagValues& /*values*/) const override {
    return absl::InvalidArgumentError(
        "--rdzv-backend: the in-process rendezvous of a one-node job answers no query; "
        "`muster stacks` without --rdzv-endpoint asks this host's agents");
  }
};

}  // namespace

const RendezvousBackend& InProcessBackend() {
  static const InProcessRendezvousBackend* const backend = new InProcessRendezvousBackend();
  return *backend;
}

}  // namespace muster

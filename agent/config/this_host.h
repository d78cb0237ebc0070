// This machine's own addresses, as the agent needs them: whether an endpoint names this
// machine (who hosts the rendezvous), a free port. No DNS lookups (they could block; where
// the agent's sockets listen is agent/config/listen_address.h). Thread-safe (no state).
#ifndef MUSTER_AGENT_THIS_HOST_H_
#define MUSTER_AGENT_THIS_HOST_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/config/config.h"

namespace muster {

// Whether `host` names this machine: loopback, our hostname, or one of our interfaces'
// addresses. Decides --rdzv-host auto.
bool IsThisHost(const std::string& host);

// A free TCP port on 127.0.0.1 (bind to 0, read it back, close): what torchrun's
// --standalone does for a static store (--store rank0). It can race; --store agent does not.
absl::StatusOr<int> PickFreePort();

}  // namespace muster

#endif  // MUSTER_AGENT_THIS_HOST_H_

// This machine's own addresses, as the agent needs them: whether an endpoint names this
// machine (who hosts the rendezvous), where the store may listen, a free port. No DNS
// lookups (they could block). Thread-safe (no state).
#ifndef MUSTER_AGENT_THIS_HOST_H_
#define MUSTER_AGENT_THIS_HOST_H_

#include <string>

#include "absl/status/statusor.h"
#include "agent/config.h"

namespace muster {

// Whether `host` names this machine: loopback, our hostname, or one of our interfaces'
// addresses. Decides --rdzv-host auto.
bool IsThisHost(const std::string& host);

// Where the agent's store listens: only where workers must reach it. A numeric address
// is bound as is (127.0.0.1 by default: loopback only); a hostname could resolve to any
// local address, so it gets the dual-stack wildcard.
std::string StoreBindAddress(const std::string& advertised);

// Where the agent's own side listeners (--health-port, --metrics-port) listen, as
// "host:port" for gRPC and the metrics server: today every address ("[::]:port"), as the
// health port always did. One function, so that both follow one rule.
std::string ListenAddressFor(const Config& config, int port);

// A free TCP port on 127.0.0.1 (bind to 0, read it back, close): what torchrun's
// --standalone does for a static store (--store rank0). It can race; --store agent does not.
absl::StatusOr<int> PickFreePort();

}  // namespace muster

#endif  // MUSTER_AGENT_THIS_HOST_H_

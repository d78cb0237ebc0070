// ListenAddress: the one numeric address each of the agent's listening sockets binds
// (docs/operations/network.md "Addresses and listening sockets"). Never a wildcard: the c10d store
// is unauthenticated (torch's protocol), so it listens only where the workers are told to reach it,
// and the health and metrics ports only where other hosts reach this node.
//
//   store address (the c10d store; the shared rendezvous port and the TLS rendezvous
//   listener of the agent that serves the rendezvous):
//     one node (no --rdzv-endpoint)        --master-addr (127.0.0.1 unless given)
//     --local-addr / POD_IP given          that address
//     static form, node rank 0             --master-addr (the address every node dials)
//     otherwise                            the local address of the route toward the
//                                          rendezvous endpoint (what the server would see)
//   node address (--health-port, --metrics-port): --local-addr / POD_IP when given, else
//   the store address (so a one-node job on bare metal serves probes on loopback only).
//
// A name is resolved and must give an address of this host (names that are not are
// refused naming the flag, exit 2); "localhost" is 127.0.0.1. Resolving may block (DNS):
// call it before the event loop runs, with a sleep that ends early on a signal.
// Thread-safe (no state).
#ifndef MUSTER_AGENT_LISTEN_ADDRESS_H_
#define MUSTER_AGENT_LISTEN_ADDRESS_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "agent/config/config.h"

namespace muster {

// Sleeps up to `d`; returns false (at once) when the agent is being stopped.
using ListenWaitFn = std::function<bool(absl::Duration d)>;

enum class ListenPurpose {
  kStore,  // the c10d store, and the rendezvous port when this agent serves it
  kNode,   // --health-port, --metrics-port
};

// The numeric address (no brackets) the socket for `purpose` binds. The route toward an
// endpoint whose name does not resolve yet is retried with backoff until the join
// timeout (Unavailable then; Cancelled when `wait` reports a stop); a flag naming an
// address that is not this host's is InvalidArgument naming the flag.
absl::StatusOr<std::string> ListenAddressFor(const Config& config, ListenPurpose purpose,
                                             const ListenWaitFn& wait);

// For the agent that serves the rendezvous on `address`: its own client (and every agent
// on this host) dials the endpoint's name, so a name that resolves here to another of this
// host's addresses would reach nothing. InvalidArgument naming both then; OK when the name
// resolves to `address`, to no address of this host (a Service's cluster IP), or not yet.
absl::Status CheckServedEndpoint(const Config& config, const std::string& address);

// "addr:port" or "[v6addr]:port", as gRPC's and HTTP servers' listen addresses.
std::string ListenEndpoint(const std::string& address, int port);

// Whether this agent can never be group rank 0 and so never serves the store: a node
// rank above 0 in a job of a fixed node count (the rendezvous places a hinted node at its
// rank once the round has every node; see rendezvous/core/rank_order.h). Operators'
// worker Pods (RANK > 0) and the static form's node ranks > 0 are such agents.
bool NeverServesStore(const Config& config);

// The first address `host` resolves to that belongs to this host ("localhost":
// 127.0.0.1; a numeric address is checked as it is). InvalidArgument naming `where`
// otherwise.
absl::StatusOr<std::string> LocalAddressOf(const std::string& where, const std::string& host);

// The local address the kernel would use to reach `host` (no packet is sent: a UDP
// socket is connected and read back). Unavailable while `host` does not resolve.
absl::StatusOr<std::string> RouteSourceAddress(const std::string& host, int port);

}  // namespace muster

#endif  // MUSTER_AGENT_LISTEN_ADDRESS_H_

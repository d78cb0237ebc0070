// AgentSession: the server's end of one agent's Session stream (a gRPC callback
// reactor). Reads the agent's messages and hands them to the JobRegistry; writes the
// events the registry routes to this node through a queue (one write in flight). The
// first message must be Join; a refused join is answered with ServerMessage.Error and
// the stream ends with the same status. When the stream closes or fails, the node is
// lost at once (docs/design.md §4.3). RequestStacks queues a StacksRequest like an event.
//
// Ownership: gRPC holds the reactor until OnDone; the registry holds a shared_ptr to it as
// the node's route; the session keeps itself alive until OnDone. Thread-safe: reactions
// run on gRPC threads, Enqueue/Flush on any thread; nothing blocks.
#ifndef MUSTER_RENDEZVOUS_GRPC_AGENT_SESSION_H_
#define MUSTER_RENDEZVOUS_GRPC_AGENT_SESSION_H_

#include <grpcpp/support/server_callback.h>

#include "rendezvous/registry/job_registry.h"
#include "rendezvous/registry/stacks_broker.h"

namespace muster::v1 {
class AgentMessage;
class ServerMessage;
}  // namespace muster::v1

namespace muster::rdzv::grpc_internal {

// "ipv4:10.0.0.2:53412" -> "10.0.0.2"; "ipv6:[fd00::2]:1" -> "fd00::2".
std::string PeerHost(const std::string& peer);

using SessionReactor = grpc::ServerBidiReactor<v1::AgentMessage, v1::ServerMessage>;

// A new session reading from the stream; gRPC owns the returned reactor. The agent's
// answers to stacks requests go to `stacks` (docs/guides/hangs-and-stacks.md "Stacks").
SessionReactor* NewAgentSession(JobRegistry* registry, StacksBroker* stacks, std::string peer);

}  // namespace muster::rdzv::grpc_internal

#endif  // MUSTER_RENDEZVOUS_GRPC_AGENT_SESSION_H_

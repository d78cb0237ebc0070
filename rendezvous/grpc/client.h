// GrpcRendezvousClient: an agent's side of the gRPC rendezvous (docs/design.md §4.3). Reaches the
// server (retrying unresolvable or unreachable endpoints with backoff inside the join
// timeout), holds one Session stream and sends Join, then the agent's reports as they
// come. Liveness is the connection's: TCP keepalive with spec.heartbeat_interval and
// heartbeat_misses (tcp_keepalive.h), no heartbeat messages.
// Every server message becomes an Event on the agent's EventLoop (via Post); a refusal or
// a lost stream becomes one error (see RendezvousClient::ErrorSink): the server's code for
// a refused join, Unauthenticated for a bad token, Unavailable for a server that is
// unreachable past the join timeout or lost after joining.
//
// Ownership: the agent owns the client; the EventLoop must outlive it. Destruction cancels
// the stream and joins the client's thread; sinks never run after it. Threading: as
// RendezvousClient (all methods and the destructor on the loop thread).
#ifndef MUSTER_RENDEZVOUS_GRPC_CLIENT_H_
#define MUSTER_RENDEZVOUS_GRPC_CLIENT_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/endpoint.h"
#include "base/event_loop.h"
#include "rendezvous/client.h"
#include "rendezvous/core/stacks.h"

namespace muster::rdzv {

class GrpcRendezvousClient : public RendezvousClient {
 public:
  // `muster stacks` (docs/guides/hangs-and-stacks.md "Stacks"): called on the loop thread when the
  // server asks for this node's worker stacks; `reply` may be called once, from any thread, within
  // `timeout` (later answers are dropped by the server).
  using StacksReply = std::function<void(std::vector<RankStack> ranks)>;
  using StacksHandler = std::function<void(absl::Duration timeout, StacksReply reply)>;

  struct Options {
    Endpoint endpoint;          // the rendezvous server, parsed once (base/endpoint.h)
    std::string token;          // non-empty: sent as "authorization: Bearer <token>"
    std::string tls_ca_file;    // PEM; set: TLS, verifying the server against it
    std::string tls_cert_file;  // PEM client certificate + key, for servers that require one
    std::string tls_key_file;
    EventLoop* loop = nullptr;  // required: the agent's loop, where the sinks run
    // How long to keep trying to reach the server before Unavailable.
    absl::Duration join_timeout = absl::Seconds(600);
    StacksHandler on_stacks_request;  // unset: requests go unanswered
  };

  // InvalidArgument for an endpoint without a host or port, a missing loop or unreadable TLS files.
  // Nothing is contacted before Start.
  static absl::StatusOr<std::unique_ptr<GrpcRendezvousClient>> Create(const Options& options);

  ~GrpcRendezvousClient() override;

  void Start(const NodeInfo& node, const JobSpec& spec, EventSink events,
             ErrorSink errors) override;
  void ReportFailure(int round, const Failure& failure) override;
  void ReportSucceeded(int round) override;
  void ReportWorkersStarted(int round, const std::vector<StartedWorker>& workers) override;
  void ReportWorkerEnded(int round, const EndedWorker& worker) override;
  void ReportStopped(int round, int store_port) override;
  void ReportStalled(int round, const Stall& stall) override;
  void ReportSample(int round, const StragglerSample& sample) override;
  void ReportHealth(const std::string& excluded) override;
  void Preempt(const std::string& reason) override;
  bool UploadTraces(const std::vector<TraceChunk>& chunks) override;
  void Leave(const std::string& why) override;

  // True once the stream to the server has ended (after Leave, Finished, a refusal or a
  // lost connection), within `timeout`; false if it has not or was never opened. By then
  // what its end means (an error, or none after Leave) is posted to the loop: a test waits
  // here for the end instead of sleeping and asserting that no error came.
  bool WaitStreamEnded(absl::Duration timeout);

 private:
  class Impl;
  explicit GrpcRendezvousClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_CLIENT_H_

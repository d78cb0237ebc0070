// EtcdRendezvousClient: an agent's side of the etcd rendezvous backend (--rdzv-backend
// etcd; docs/guides/etcd.md). No node is special: every agent registers its own key
// under PREFIX/RUN_ID/nodes/ with its own lease (no compare-and-swap on a shared key), the
// agent with the oldest key coordinates (rendezvous/etcd/coordinator.h runs core's Job),
// and every agent watches the job's keys for the coordinator's events. When the
// coordinator's key goes (its lease expired, it left), the next oldest takes over from the
// state the previous one kept in etcd; agents running a round of the old one stop their
// workers first (a membership change: the budget is not used).
//
// Liveness is the etcd lease: TTL = heartbeat_interval x heartbeat_misses, kept alive
// every third of it. An agent whose lease cannot be kept past its TTL, or that cannot
// watch any member for a TTL, reports Unavailable (the agent exits 138).
//
// Ownership and threading: as GrpcRendezvousClient (the agent owns it, methods on the
// loop thread, sinks posted to the loop). Threads of its own (docs/design.md §2.1): the brain, a
// reactor (base/event_loop.h) that applies watch events, reports and the coordinator's deadlines in
// order; one per watch, reading it; the lease keeper's two; liveness's reactor. Destruction stops
// them and revokes the lease (the agent's keys go at once).
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_RENDEZVOUS_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_RENDEZVOUS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/event_loop.h"
#include "rendezvous/client.h"
#include "rendezvous/etcd/etcd_security.h"

namespace muster::rdzv::etcd {

class EtcdRendezvousClient : public RendezvousClient {
 public:
  struct Options {
    std::vector<std::string> endpoints;  // etcd members, "host:port"
    std::string prefix = "/muster";      // keys go under PREFIX/RUN_ID/
    EventLoop* loop = nullptr;           // required
    absl::Duration join_timeout = absl::Seconds(600);
    EtcdSecurity security;  // TLS and user; a refusal of them fails the join at once
    // A job-wide `muster stacks` (etcd_requests.h): called on the loop thread; the reply
    // (from any thread) is put as this node's answer. Unset: such requests go unanswered.
    std::function<void(absl::Duration timeout,
                       std::function<void(std::vector<RankStack> ranks)> reply)>
        on_stacks_request;
  };
  static absl::StatusOr<std::unique_ptr<EtcdRendezvousClient>> Create(const Options& options);
  ~EtcdRendezvousClient() override;

  void Start(const NodeInfo& node, const JobSpec& spec, EventSink events,
             ErrorSink errors) override;
  void ReportFailure(int round, const Failure& failure) override;
  void ReportSucceeded(int round) override;
  void ReportWorkersStarted(int round, const std::vector<StartedWorker>& workers) override;
  void ReportWorkerEnded(int round, const EndedWorker& worker) override;
  void ReportStopped(int round, int store_port) override;
  // Hang detection and preemption notices travel as reports to the coordinator, whose Job
  // decides (a hang once every node stalled) and answers through the events key.
  void ReportStalled(int round, const Stall& stall) override;
  void ReportSample(int round, const StragglerSample& sample) override;
  void ReportHealth(const std::string& excluded) override;
  void Preempt(const std::string& reason) override;
  // Flight recorder dumps (docs/guides/collective-traces.md): etcd values are too small to carry
  // them; the job is told where each file stays (HOST:PATH) instead.
  bool UploadTraces(const std::vector<TraceChunk>& chunks) override;
  void Leave(const std::string& why) override;

  class Impl;

 private:
  explicit EtcdRendezvousClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_RENDEZVOUS_H_

// LocalRendezvous: a RendezvousClient backed by an in-process core::Job, for jobs of one
// node (--standalone, --nnodes 1). No sockets and no threads: calls go straight to the
// Job, whose events are handed back through EventLoop::Post (never re-entrantly), and the
// Job's deadlines become loop timers. Restart budget, history and outcome therefore follow
// exactly the same rules as a multi-node job. Not thread-safe: the loop thread only.
#ifndef MUSTER_RENDEZVOUS_LOCAL_CLIENT_H_
#define MUSTER_RENDEZVOUS_LOCAL_CLIENT_H_

#include <optional>
#include <string>
#include <vector>

#include "base/event_loop.h"
#include "rendezvous/client.h"
#include "rendezvous/core/job.h"

namespace muster::rdzv {

class LocalRendezvous : public RendezvousClient {
 public:
  explicit LocalRendezvous(EventLoop* loop) : loop_(loop) {}
  ~LocalRendezvous() override;

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
  // One node: its dumps already are in one place, its attempt folder; none is copied.
  bool UploadTraces(const std::vector<TraceChunk>& chunks) override;
  void Leave(const std::string& why) override;

  const Job* job() const { return job_ ? &*job_ : nullptr; }

 private:
  void Deliver(std::vector<Event> events);

  EventLoop* loop_;
  std::string node_id_;
  std::string host_;
  std::optional<Job> job_;
  EventSink events_;
  EventLoop::TimerId timer_ = 0;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_LOCAL_CLIENT_H_

// RendezvousClient: how an agent takes part in a job, whatever carries it. Two
// implementations: LocalRendezvous (an in-process core::Job, for single-node jobs, no
// sockets) and rendezvous/grpc's client (a long-lived stream to a remote server).
//
// Threading: every method is called from the agent's loop thread, and the sinks are always
// invoked on that thread too (implementations hop threads with EventLoop::Post), never
// re-entrantly from inside a method call.
#ifndef MUSTER_RENDEZVOUS_CLIENT_H_
#define MUSTER_RENDEZVOUS_CLIENT_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "rendezvous/core/hang.h"
#include "rendezvous/core/types.h"
#include "rendezvous/rendezvous_error.h"

namespace muster::rdzv {

class RendezvousClient {
 public:
  using EventSink = std::function<void(const Event& event)>;
  // The rendezvous cannot go on: InvalidArgument/FailedPrecondition/Unauthenticated for
  // permanent problems (bad token, wrong run id, rank conflict: the agent exits 2),
  // Unavailable/DeadlineExceeded for transient ones (server unreachable past the join
  // timeout, stream lost: the agent exits 138). Called at most once, except that an error
  // with a kill-by time (rendezvous_error.h: its workers must be dead by then) may follow.
  using ErrorSink = std::function<void(const RendezvousError& error)>;

  virtual ~RendezvousClient() = default;

  // Joins the job. Events (progress, round started, stop, finished) follow on `events`.
  virtual void Start(const NodeInfo& node, const JobSpec& spec, EventSink events,
                     ErrorSink errors) = 0;
  virtual void ReportFailure(int round, const Failure& failure) = 0;
  virtual void ReportSucceeded(int round) = 0;
  // Status only (docs/design.md §4.6): the workers of `round` were spawned (once per round), and
  // one of them ended, for whatever reason (sent before ReportFailure/ReportSucceeded).
  virtual void ReportWorkersStarted(int round, const std::vector<StartedWorker>& workers) = 0;
  virtual void ReportWorkerEnded(int round, const EndedWorker& worker) = 0;
  // Workers of `round` are stopped; the node's fresh store for the next round listens on
  // `store_port`.
  virtual void ReportStopped(int round, int store_port) = 0;
  // Hang detection (--hang-timeout, rendezvous/core/hang.h): this node's workers of `round`
  // stalled, or progress again. The job decides once every node has stalled. A backend
  // without the job-wide path ignores it (the agent refuses --hang-timeout there).
  virtual void ReportStalled(int round, const Stall& stall) = 0;
  // Stragglers (--straggler-window, rendezvous/core/straggler.h): this node's ranks' stacks,
  // sampled while the workers of `round` run. The job judges once every node's sample is in
  // and tells every node when the rank named changes (kStraggler). A backend without the
  // job-wide path ignores it.
  virtual void ReportSample(int /*round*/, const StragglerSample& /*sample*/) {}
  // This node is being preempted (docs/guides/preemption.md): the job tells every node (kPreempt,
  // this one included) before anything is stopped. A backend without notices ignores it.
  virtual void Preempt(const std::string& /*reason*/) {}
  // Flight recorder dumps of a round that failed (docs/guides/collective-traces.md): `chunks` in
  // order, the last one `done`. The job answers every node of the round with kTraces. A
  // backend that keeps no traces ignores it (the agent then waits for no answer).
  virtual bool UploadTraces(const std::vector<TraceChunk>& /*chunks*/) { return false; }
  // This node's health gate changed its verdict (docs/design.md §3 "Health gate"):
  // `excluded` says why it stays out of rounds, "" that it may take part again. The first
  // verdict travels with Start (NodeInfo::excluded); a report sent before ReportStopped
  // reaches the job before it.
  virtual void ReportHealth(const std::string& excluded) = 0;
  // The agent is leaving on purpose (a signal): the job treats it as a lost node.
  virtual void Leave(const std::string& why) = 0;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CLIENT_H_

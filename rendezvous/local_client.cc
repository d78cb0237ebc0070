#include "rendezvous/local_client.h"

#include "absl/strings/str_cat.h"

namespace muster::rdzv {

LocalRendezvous::~LocalRendezvous() {
  if (timer_ != 0) loop_->CancelTimer(timer_);
}

void LocalRendezvous::Start(const NodeInfo& node, const JobSpec& spec, EventSink events,
                            ErrorSink errors) {
  node_id_ = node.node_id;
  host_ = node.host;
  events_ = std::move(events);
  job_.emplace(spec, EventLoop::Now());
  std::vector<Event> out;
  absl::Status status = job_->Join(node, spec, EventLoop::Now(), &out);
  if (!status.ok()) {
    loop_->Post(
        [errors = std::move(errors), status] { errors(RendezvousError{.status = status}); });
    return;
  }
  Deliver(std::move(out));
}

void LocalRendezvous::ReportFailure(int round, const Failure& failure) {
  std::vector<Event> out;
  job_->WorkerFailed(node_id_, round, failure, EventLoop::Now(), &out);
  Deliver(std::move(out));
}

void LocalRendezvous::ReportSucceeded(int round) {
  std::vector<Event> out;
  job_->WorkersSucceeded(node_id_, round, EventLoop::Now(), &out);
  Deliver(std::move(out));
}

void LocalRendezvous::ReportWorkersStarted(int round, const std::vector<StartedWorker>& workers) {
  job_->WorkersStarted(node_id_, round, workers, EventLoop::Now());
}

void LocalRendezvous::ReportWorkerEnded(int round, const EndedWorker& worker) {
  job_->WorkerEnded(node_id_, round, worker, EventLoop::Now());
}

void LocalRendezvous::ReportStopped(int round, int store_port) {
  std::vector<Event> out;
  job_->WorkersStopped(node_id_, round, store_port, EventLoop::Now(), &out);
  Deliver(std::move(out));
}

void LocalRendezvous::ReportStalled(int round, const Stall& stall) {
  std::vector<Event> out;
  job_->NodeStalled(node_id_, round, stall, EventLoop::Now(), &out);
  Deliver(std::move(out));
}

void LocalRendezvous::ReportSample(int round, const StragglerSample& sample) {
  std::vector<Event> out;
  job_->NodeSampled(node_id_, round, sample, EventLoop::Now(), &out);
  Deliver(std::move(out));
}

void LocalRendezvous::ReportHealth(const std::string& excluded) {
  std::vector<Event> out;
  job_->NodeHealth(node_id_, excluded, EventLoop::Now(), &out);
  Deliver(std::move(out));
}

void LocalRendezvous::Preempt(const std::string& reason) {
  std::vector<Event> out;
  (void)job_->Preempt(node_id_, reason, EventLoop::Now(), &out);  // between rounds: nothing to do
  Deliver(std::move(out));
}

bool LocalRendezvous::UploadTraces(const std::vector<TraceChunk>& chunks) {
  if (chunks.empty() || !chunks.back().done) return false;
  const TraceChunk& done = chunks.back();
  // The files as they are on disk: the agent's note on what an upload would truncate or
  // skip does not apply to them.
  TraceNode stored{.node_id = node_id_, .host = host_};
  for (const TraceChunk& c : chunks) {
    if (c.done) continue;
    if (stored.files.empty() || stored.files.back() != c.file) stored.files.push_back(c.file);
    stored.bytes += static_cast<int64_t>(c.data.size());
  }
  std::vector<Event> out;
  job_->TracesStored(node_id_, done.round, absl::StrCat(host_, ":", done.dir, "/"),
                     std::move(stored), /*error=*/"", EventLoop::Now(), &out);
  Deliver(std::move(out));
  return true;
}

void LocalRendezvous::Leave(const std::string& why) {
  std::vector<Event> out;
  job_->NodeLost(node_id_, why, EventLoop::Now(), &out);
  // Nobody is left to tell: the job ends with this node.
}

void LocalRendezvous::Deliver(std::vector<Event> events) {
  for (Event& e : events) {
    loop_->Post([this, e = std::move(e)] { events_(e); });
  }
  if (timer_ != 0) loop_->CancelTimer(timer_);
  timer_ = 0;
  if (std::optional<absl::Time> next = job_->NextDeadline();
      next && *next != absl::InfiniteFuture()) {
    timer_ = loop_->AddTimer(*next, [this] {
      timer_ = 0;
      std::vector<Event> out;
      job_->Tick(EventLoop::Now(), &out);
      Deliver(std::move(out));
    });
  }
}

}  // namespace muster::rdzv

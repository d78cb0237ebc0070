#include "agent/cli/metered_parts.h"

#include <algorithm>
#include <utility>

namespace muster {
namespace {

class MeteredLauncher : public WorkerLauncher {
 public:
  MeteredLauncher(std::unique_ptr<WorkerLauncher> inner,
                  std::shared_ptr<metrics::AgentMetrics> metrics)
      : inner_(std::move(inner)), metrics_(std::move(metrics)) {}

  void SetCallbacks(Callbacks callbacks) override {
    auto on_exit = std::move(callbacks.on_exit);
    callbacks.on_exit = [this, on_exit = std::move(on_exit)](const WorkerExit& e) {
      metrics_->WorkerExited(e.code, e.while_stopping, /*was_running=*/e.pid > 0);
      on_exit(e);
    };
    inner_->SetCallbacks(std::move(callbacks));
  }
  absl::Status Start(int attempt, std::vector<WorkerSpec> specs) override {
    absl::Status st = inner_->Start(attempt, std::move(specs));
    std::vector<WorkerView> workers = inner_->Workers();
    metrics_->WorkersStarted(static_cast<int>(std::count_if(
        workers.begin(), workers.end(), [](const WorkerView& w) { return w.pid > 0; })));
    return st;
  }
  absl::Status StartCommand(std::vector<std::string> argv, std::vector<std::string> env) override {
    absl::Status st = inner_->StartCommand(std::move(argv), std::move(env));
    metrics_->WorkersStarted(st.ok() ? 1 : 0);
    return st;
  }
  void Stop(int sig) override { inner_->Stop(sig); }
  void StopWithin(int sig, absl::Duration grace) override { inner_->StopWithin(sig, grace); }
  void Escalate() override { inner_->Escalate(); }
  void OnChildSignal() override { inner_->OnChildSignal(); }
  std::vector<WorkerView> Workers() const override { return inner_->Workers(); }
  std::string containment() const override { return inner_->containment(); }
  bool running() const override { return inner_->running(); }
  bool stopping() const override { return inner_->stopping(); }
  bool AllSucceeded() const override { return inner_->AllSucceeded(); }
  std::vector<StuckProcess> Stuck() const override { return inner_->Stuck(); }
  void BeginShutdown() override { inner_->BeginShutdown(); }
  void FinishShutdown() override { inner_->FinishShutdown(); }

 private:
  std::unique_ptr<WorkerLauncher> inner_;
  std::shared_ptr<metrics::AgentMetrics> metrics_;
};

class MeteredRendezvous : public rdzv::RendezvousClient {
 public:
  MeteredRendezvous(std::unique_ptr<rdzv::RendezvousClient> inner,
                    std::shared_ptr<metrics::AgentMetrics> metrics)
      : inner_(std::move(inner)), metrics_(std::move(metrics)) {}

  void Start(const rdzv::NodeInfo& node, const rdzv::JobSpec& spec, EventSink events,
             ErrorSink errors) override {
    metrics_->RendezvousOpened();
    auto counted = [metrics = metrics_, events = std::move(events)](const rdzv::Event& e) {
      if (e.kind == rdzv::Event::Kind::kRoundStarted) {
        metrics->RoundStarted(e.assignment.restart_count);
        metrics->SetStraggler(-1, 0);  // a new round: a new tally (rendezvous/core/straggler.h)
      }
      if (e.kind == rdzv::Event::Kind::kStraggler) {
        metrics->SetStraggler(e.straggler.rank, e.straggler.share);
      }
      events(e);
    };
    inner_->Start(node, spec, std::move(counted), std::move(errors));
  }
  void ReportFailure(int round, const rdzv::Failure& failure) override {
    inner_->ReportFailure(round, failure);
  }
  void ReportSucceeded(int round) override { inner_->ReportSucceeded(round); }
  void ReportWorkersStarted(int round, const std::vector<rdzv::StartedWorker>& workers) override {
    inner_->ReportWorkersStarted(round, workers);
  }
  void ReportWorkerEnded(int round, const rdzv::EndedWorker& worker) override {
    inner_->ReportWorkerEnded(round, worker);
  }
  void ReportStopped(int round, int store_port) override {
    metrics_->RendezvousOpened();
    inner_->ReportStopped(round, store_port);
  }
  void ReportStalled(int round, const rdzv::Stall& stall) override {
    inner_->ReportStalled(round, stall);
  }
  void ReportSample(int round, const rdzv::StragglerSample& sample) override {
    inner_->ReportSample(round, sample);
  }
  void ReportHealth(const std::string& excluded) override { inner_->ReportHealth(excluded); }
  void Preempt(const std::string& reason) override { inner_->Preempt(reason); }
  void Leave(const std::string& why) override { inner_->Leave(why); }

 private:
  std::unique_ptr<rdzv::RendezvousClient> inner_;
  std::shared_ptr<metrics::AgentMetrics> metrics_;
};

}  // namespace

void MeterParts(const std::shared_ptr<metrics::AgentMetrics>& metrics, AgentParts& parts) {
  parts.launcher = std::make_unique<MeteredLauncher>(std::move(parts.launcher), metrics);
  parts.rendezvous = std::make_unique<MeteredRendezvous>(std::move(parts.rendezvous), metrics);
}

}  // namespace muster

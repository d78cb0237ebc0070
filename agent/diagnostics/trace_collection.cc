// The agent's part of collecting flight recorder dumps: agent/diagnostics/trace_collection.h.
#include "agent/diagnostics/trace_collection.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/diagnostics/flight_recorder.h"
#include "agent/diagnostics/trace_upload.h"
#include "base/plural.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// How long a failed job's exit waits for the other nodes' dumps to be stored.
constexpr absl::Duration kTracesWait = absl::Seconds(2);

// "in HOST:DIR/", or where the files stay when nothing was collected (etcd).
std::string TracesPlace(const rdzv::TracesSummary& t) {
  if (!t.location.empty()) return absl::StrCat("in ", t.location);
  std::string out = absl::StrCat("left on their nodes: ", absl::StrJoin(t.left_on_nodes, ", "));
  const int more = t.files - static_cast<int>(t.left_on_nodes.size());
  if (more > 0) absl::StrAppend(&out, " and ", more, " more (`muster status --json`)");
  return out;
}

}  // namespace

absl::Status TraceCollection::Start(AgentControl& agent) {
  agent_ = &agent;
  // The run dir exists by now (agent/lifecycle/run_dir.h).
  if (hosted_ != nullptr) hosted_->KeepTracesIn(agent.run_dir() + "/traces", agent.node().host);
  return absl::OkStatus();
}

void TraceCollection::Upload(bool even_without_files) {
  const int round = agent_->round();
  if (round == 0 || round_ == round || agent_->config().debug) return;  // once per round
  WorkerLauncher& launcher = agent_->launcher();
  std::vector<WorkerView> workers = launcher.Workers();
  if (workers.empty() || workers.front().dir.empty() || launcher.AllSucceeded()) return;
  const std::string& worker_dir = workers.front().dir;  // <run dir>/attempt_N/<local rank>
  const std::string dir = worker_dir.substr(0, worker_dir.rfind('/'));
  std::vector<std::string> files = FlightRecorderDumps(dir);
  if (files.empty() && !even_without_files) return;
  round_ = round;
  sent_ = complete_ = over_ = false;
  timer_ = 0;
  line_.clear();
  // Even without files: the nodes waiting for every node's answer need not wait for this one.
  sent_ = agent_->rendezvous()->UploadTraces(TraceUploadChunks(round, dir, files));
  if (sent_ && !files.empty()) {
    spdlog::info("sending {} of round {} to the job",
                 Plural(files.size(), "flight recorder trace", "flight recorder traces"), round);
  }
}

bool TraceCollection::HoldFinish() {
  const rdzv::Outcome* outcome = agent_->outcome();
  if (over_ || outcome == nullptr || outcome->exit_code == 0 || agent_->rendezvous() == nullptr) {
    return false;
  }
  if (timer_ != 0) return true;  // still waiting
  Upload(/*even_without_files=*/true);
  if (round_ != agent_->round() || !sent_ || complete_) {
    EndWait(/*finish=*/false);
    return false;
  }
  timer_ = agent_->loop().AddTimer(EventLoop::Now() + kTracesWait, [this] {
    timer_ = 0;
    spdlog::info("not every node's flight recorder traces were stored within {} s; exiting",
                 absl::ToInt64Seconds(kTracesWait));
    EndWait(/*finish=*/true);
  });
  return true;
}

void TraceCollection::EndWait(bool finish) {
  over_ = true;
  if (timer_ != 0) agent_->loop().CancelTimer(timer_);
  timer_ = 0;
  if (!line_.empty()) agent_->AddToSummary(line_);
  if (finish) agent_->Finish();
}

bool TraceCollection::OnRendezvousEvent(const rdzv::Event& e) {
  if (e.kind != rdzv::Event::Kind::kTraces) return false;
  OnStored(e.traces);
  return true;
}

void TraceCollection::OnStored(const rdzv::TracesSummary& t) {
  if (!t.error.empty()) {
    spdlog::warn("flight recorder traces of round {} of this node not stored: {}", t.round,
                 t.error);
  }
  const bool complete = t.nodes_reported >= t.nodes_expected;
  std::string line =
      t.files == 0 ? ""
                   : absl::StrCat("flight recorder traces of ", Plural(t.nodes, "node", "nodes"),
                                  " (", Plural(t.files, "file", "files"), ") ", TracesPlace(t));
  if (!line.empty() && line != line_) {  // the uploader's answer, then the job's last
    line_ = line;
    spdlog::info("round {}: {}", t.round, line);
    agent_->events().Write("traces_collected", {{"round", t.round},
                                                {"location", t.location},
                                                {"nodes", t.nodes},
                                                {"files", t.files},
                                                {"complete", complete}});
  }
  if (t.round != round_) return;
  complete_ = complete;
  if (complete && timer_ != 0) EndWait(/*finish=*/true);
}

}  // namespace muster

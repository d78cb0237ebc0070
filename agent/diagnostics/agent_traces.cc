// The agent's part of collecting flight recorder dumps (issue 17 item 3,
// docs/guides/collective-traces.md): once the workers of a round that did not succeed have stopped
// (torch writes its dumps at the timeout or abort, before the worker exits), the agent sends the
// dump files of that attempt to the job, which stores every node's in one place, the log dir of the
// process serving the rendezvous. Before exiting after a failed job it waits at most
// kTracesWait for the job to say where every node's dumps are, and names that place in its
// last line; restarts never wait.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/diagnostics/flight_recorder.h"
#include "agent/diagnostics/trace_upload.h"
#include "agent/lifecycle/agent.h"
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

void Agent::UploadTraces(bool even_without_files) {
  if (round_ == 0 || traces_.round == round_ || config_.debug) return;  // once per round
  std::vector<WorkerView> workers = launcher_->Workers();
  if (workers.empty() || workers.front().dir.empty() || launcher_->AllSucceeded()) return;
  const std::string& worker_dir = workers.front().dir;  // <run dir>/attempt_N/<local rank>
  const std::string dir = worker_dir.substr(0, worker_dir.rfind('/'));
  std::vector<std::string> files = FlightRecorderDumps(dir);
  if (files.empty() && !even_without_files) return;
  traces_ = TraceState{.round = round_};
  // Even without files: the nodes waiting for every node's answer need not wait for this one.
  traces_.sent = rdzv_->UploadTraces(TraceUploadChunks(round_, dir, files));
  if (traces_.sent && !files.empty()) {
    spdlog::info("sending {} of round {} to the job",
                 Plural(files.size(), "flight recorder trace", "flight recorder traces"), round_);
  }
}

bool Agent::HoldFinishForTraces() {
  if (traces_.over || !outcome_ || outcome_->exit_code == 0 || rdzv_ == nullptr) return false;
  if (traces_.timer != 0) return true;  // still waiting
  UploadTraces(/*even_without_files=*/true);
  if (traces_.round != round_ || !traces_.sent || traces_.complete) {
    EndTracesWait(/*finish=*/false);
    return false;
  }
  traces_.timer = loop_->AddTimer(EventLoop::Now() + kTracesWait, [this] {
    traces_.timer = 0;
    spdlog::info("not every node's flight recorder traces were stored within {} s; exiting",
                 absl::ToInt64Seconds(kTracesWait));
    EndTracesWait(/*finish=*/true);
  });
  return true;
}

void Agent::EndTracesWait(bool finish) {
  traces_.over = true;
  if (traces_.timer != 0) loop_->CancelTimer(traces_.timer);
  traces_.timer = 0;
  if (exit_plan_ && !traces_.line.empty())
    absl::StrAppend(&exit_plan_->summary, "; ", traces_.line);
  if (finish) Finish();
}

void Agent::OnTracesStored(const rdzv::TracesSummary& t) {
  if (!t.error.empty()) {
    spdlog::warn("flight recorder traces of round {} of this node not stored: {}", t.round,
                 t.error);
  }
  const bool complete = t.nodes_reported >= t.nodes_expected;
  std::string line =
      t.files == 0 ? ""
                   : absl::StrCat("flight recorder traces of ", Plural(t.nodes, "node", "nodes"),
                                  " (", Plural(t.files, "file", "files"), ") ", TracesPlace(t));
  if (!line.empty() && line != traces_.line) {  // the uploader's answer, then the job's last
    traces_.line = line;
    spdlog::info("round {}: {}", t.round, line);
    events_->Write("traces_collected", {{"round", t.round},
                                        {"location", t.location},
                                        {"nodes", t.nodes},
                                        {"files", t.files},
                                        {"complete", complete}});
  }
  if (t.round != traces_.round) return;
  traces_.complete = complete;
  if (complete && traces_.timer != 0) EndTracesWait(/*finish=*/true);
}

}  // namespace muster

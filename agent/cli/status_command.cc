// `muster status`: one job's status from the rendezvous server, as a table or JSON.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/job_query.h"
#include "agent/cli/subcommands.h"
#include "agent/config/rendezvous_flags.h"
#include "agent/config/subcommand.h"
#include "agent/lifecycle/failure_report.h"
#include "agent/lifecycle/status_file.h"
#include "base/duration.h"
#include "base/endpoint.h"
#include "base/exit_codes.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"
#include "rendezvous/core/job_status.h"

namespace muster {
namespace {

constexpr FlagSpec kStatusOwnFlags[] = {
    {.name = "rdzv-endpoint",
     .group = "Status",
     .default_text = "required",
     .help = "HOST[:PORT] of the rendezvous server"},
    {.name = "rdzv-id",
     .group = "Status",
     .default_text = "",
     .help = "the job's run id; without it, the list of the server's jobs"},
    {.name = "json",
     .takes_value = false,
     .group = "Status",
     .default_text = "off",
     .help = "print JSON instead of a table"},
    {.name = "watch",
     .takes_value = false,
     .group = "Status",
     .default_text = "off",
     .help = "follow the job: print each change until it ends"},
};
constexpr auto kStatusFlags = WithJobQueryFlags(kStatusOwnFlags);

// The server answered that it has no such job (a permanent answer, unlike 138's).
constexpr int kNoSuchJob = 1;

constexpr Subcommand kStatus = {
    .name = "status",
    .usage =
        "Usage: muster status --rdzv-endpoint H[:P] [--rdzv-id ID] [--json] [--watch]\n"
        "       muster status --rdzv-backend etcd --rdzv-endpoint H:2379[,...] --rdzv-id ID "
        "[--json]\n"
        "Without --rdzv-id: the jobs the server knows (running and finished).\n",
    .flags = kStatusFlags,
};

// When the job was created and when it finished (InfiniteFuture while it runs), from its
// conditions: Created flips once, and Succeeded or Failed turns True at the outcome.
std::pair<absl::Time, absl::Time> Lifetime(const rdzv::JobStatusSnapshot& s) {
  absl::Time created = absl::InfinitePast(), finished = absl::InfiniteFuture();
  for (const rdzv::Condition& c : s.conditions) {
    if (c.type == "Created") created = c.last_transition;
    if ((c.type == "Succeeded" || c.type == "Failed") && c.status) finished = c.last_transition;
  }
  return {created, finished};
}

double Seconds(absl::Time from, absl::Time to) { return absl::ToDoubleSeconds(to - from); }

// Elapsed time, the current round's time and the store workers use (MASTER_ADDR:PORT).
void AddTiming(const rdzv::JobStatusSnapshot& s, nlohmann::json& j) {
  auto [created, finished] = Lifetime(s);
  absl::Time end = std::min(finished, absl::Now());
  if (created != absl::InfinitePast()) j["elapsed_s"] = Seconds(created, end);
  if (s.round_started != absl::InfinitePast()) {
    j["round_started"] = absl::FormatTime(s.round_started);
    j["round_elapsed_s"] = Seconds(s.round_started, end);
  }
  if (!s.participants.empty() && s.participants[0].store_port > 0) {
    j["master"] = JoinHostPort(s.participants[0].address, s.participants[0].store_port);
  }
}

// The nodes being preempted, with their reasons (docs/guides/preemption.md).
void AddPreempting(const rdzv::JobStatusSnapshot& s, nlohmann::json& j) {
  for (const rdzv::Preemption& p : s.preempting) {
    j["preempting"].push_back({{"node_id", p.node_id},
                               {"host", p.host},
                               {"reason", p.reason},
                               {"since", absl::FormatTime(p.since)}});
  }
}

// The rank the job names a straggler, while one is (docs/guides/hangs-and-stacks.md).
void AddStraggler(const rdzv::JobStatusSnapshot& s, nlohmann::json& j) {
  if (!s.straggler) return;
  const rdzv::StragglerVerdict& v = *s.straggler;
  j["straggler"] = {
      {"rank", v.rank},   {"local_rank", v.local_rank}, {"node_id", v.node_id}, {"host", v.host},
      {"share", v.share}, {"samples", v.samples},       {"stack", v.stack},     {"line", v.line}};
}

// Flight recorder dumps the server collected, by round (docs/guides/collective-traces.md).
void AddTraces(const rdzv::JobStatusSnapshot& s, nlohmann::json& j) {
  for (const rdzv::TraceRound& r : s.traces) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const rdzv::TraceNode& n : r.nodes) {
      nodes.push_back({{"node_id", n.node_id},
                       {"host", n.host},
                       {"files", n.files},
                       {"bytes", n.bytes},
                       {"note", n.note}});
    }
    j["traces"].push_back({{"round", r.round}, {"location", r.location}, {"nodes", nodes}});
  }
}

// "flight recorder traces of round 1: 2 nodes (4 files) in HOST:DIR/", then each node's.
void PrintTraces(const nlohmann::json& j) {
  for (const auto& r : j.value("traces", nlohmann::json::array())) {
    size_t files = 0;
    for (const auto& n : r["nodes"]) files += n["files"].size();
    if (files == 0) continue;
    std::string where = r["location"].get<std::string>();
    where = where.empty() ? "left on their nodes" : "in " + where;  // etcd: not collected
    std::printf("flight recorder traces of round %d: %zu node%s (%zu file%s) %s\n",
                r["round"].get<int>(), r["nodes"].size(), r["nodes"].size() == 1 ? "" : "s", files,
                files == 1 ? "" : "s", where.c_str());
    for (const auto& n : r["nodes"]) {
      std::string names = absl::StrJoin(n["files"].get<std::vector<std::string>>(), " ");
      std::string note = n["note"].get<std::string>();
      std::printf("       %s: %s%s%s\n", n["host"].get<std::string>().c_str(), names.c_str(),
                  note.empty() ? "" : "; ", note.c_str());
    }
  }
}

nlohmann::json ToJson(const rdzv::JobStatusSnapshot& s) {
  nlohmann::json j = {{"run_id", s.run_id},
                      {"phase", rdzv::JobPhaseName(s.phase)},
                      {"round", s.round},
                      {"attempt", s.attempt},
                      {"restarts_used", s.restarts_used},
                      {"max_restarts", s.max_restarts},
                      {"min_nodes", s.min_nodes},
                      {"max_nodes", s.max_nodes},
                      {"conditions", nlohmann::json::array()},
                      {"nodes", nlohmann::json::array()},
                      {"workers", nlohmann::json::array()},
                      {"history", nlohmann::json::array()}};
  AddTiming(s, j);
  AddPreempting(s, j);
  AddStraggler(s, j);
  AddTraces(s, j);
  for (const rdzv::Condition& c : s.conditions) {
    j["conditions"].push_back({{"type", c.type},
                               {"status", c.status ? "True" : "False"},
                               {"reason", c.reason},
                               {"message", c.message},
                               {"last_transition_time", absl::FormatTime(c.last_transition)}});
  }
  for (const rdzv::WorkerStatus& w : s.workers) {
    nlohmann::json worker = {{"rank", w.rank},
                             {"local_rank", w.local_rank},
                             {"group_rank", w.group_rank},
                             {"node_id", w.node_id},
                             {"host", w.host},
                             {"pid", w.pid},
                             {"state", rdzv::WorkerStateName(w.state)},
                             {"restarts", w.restarts}};
    if (!w.start.empty()) worker["start"] = w.start;
    if (!w.fallback.empty()) worker["fallback"] = w.fallback;
    if (w.state != rdzv::WorkerState::kPending && w.state != rdzv::WorkerState::kRunning) {
      worker["code"] = w.code;
      worker["signal"] = w.signal;
      worker["what"] = w.what;
    }
    j["workers"].push_back(worker);
  }
  for (const rdzv::NodeStatus& n : s.nodes) {
    nlohmann::json node = {{"node_id", n.node_id},
                           {"host", n.host},
                           {"address", n.address},
                           {"group_rank", n.group_rank},
                           {"local_world_size", n.local_world_size},
                           {"state", rdzv::NodeStateName(n.state)},
                           {"probe", n.probe},
                           {"command", n.command},
                           {"log_dir", n.log_dir},
                           {"containment", n.containment},
                           {"excluded", n.excluded},
                           {"last_heartbeat", absl::FormatTime(n.last_heartbeat)}};
    if (n.group_rank >= 0) {
      int base = 0;
      for (const rdzv::NodeInfo& p : s.participants) {
        if (p.node_id == n.node_id) break;
        base += p.local_world_size;
      }
      node["ranks"] = {base, base + n.local_world_size - 1};
    }
    j["nodes"].push_back(node);
  }
  for (const rdzv::RestartRecord& r : s.history) {
    nlohmann::json h = {{"round", r.round},
                        {"attempt", r.attempt},
                        {"time", absl::FormatTime(r.time)},
                        {"reason", r.reason},
                        {"counted", r.counted}};
    if (r.started != absl::InfinitePast()) {
      h["started"] = absl::FormatTime(r.started);
      h["duration_s"] = Seconds(r.started, r.time);
    }
    if (r.failure) h["failure"] = FailureJson(*r.failure);
    j["history"].push_back(h);
  }
  if (s.outcome) {
    j["outcome"] = {{"exit_code", s.outcome->exit_code}, {"reason", s.outcome->reason}};
    if (s.outcome->root_cause) j["root_cause"] = FailureJson(*s.outcome->root_cause);
  }
  return j;
}

std::string Paint(const std::string& state, bool color) {
  if (!color) return state;
  const char* c = state == "Running" || state == "Succeeded" || state == "True" ? "32"
                  : state == "Failed"                                           ? "31"
                                                                                : "33";
  return absl::StrCat("\033[", c, "m", state, "\033[0m");
}

// printf's %-Ns counts the colour escapes: pad the plain text, then paint it.
std::string PaintPadded(const std::string& state, int width, bool color) {
  std::string padded = state;
  if (static_cast<int>(padded.size()) < width) padded.resize(width, ' ');
  if (!color) return padded;
  return Paint(state, true) + padded.substr(state.size());
}

std::string TimeOfDay(const std::string& rfc3339) {
  absl::Time t;
  std::string err;
  if (!absl::ParseTime(absl::RFC3339_full, rfc3339, &t, &err)) return rfc3339;
  return absl::FormatTime("%H:%M:%S", t, absl::LocalTimeZone());
}

// The root cause's last lines of stderr, when it wrote no error file.
void PrintRootCauseStderr(const nlohmann::json& j) {
  if (!j.contains("root_cause")) return;
  const nlohmann::json& f = j["root_cause"];
  std::string block =
      StderrBlock(f["rank"].get<int>(), f["host"].get<std::string>(), f.value("stderr_tail", ""),
                  f.value("kind", "") == rdzv::FailureKindName(rdzv::FailureKind::kHung));
  if (!block.empty()) std::printf("%s\n", block.c_str());
}

std::string SecondsText(const nlohmann::json& seconds) {
  return HumanDuration(absl::Seconds(seconds.get<double>()));
}

// "elapsed 12.3s, round 2 running for 1.01s, master 10.0.0.1:29500"
void PrintTiming(const nlohmann::json& j) {
  std::vector<std::string> parts;
  if (j.contains("elapsed_s")) parts.push_back("elapsed " + SecondsText(j["elapsed_s"]));
  if (j.contains("round_elapsed_s")) {
    parts.push_back(absl::StrCat("round ", j["round"].get<int>(),
                                 j["phase"] == "Running" ? " running for " : " ran ",
                                 SecondsText(j["round_elapsed_s"])));
  }
  if (j.contains("master")) parts.push_back("master " + j["master"].get<std::string>());
  if (!parts.empty()) std::printf("%s\n", absl::StrJoin(parts, ", ").c_str());
}

void PrintTable(const nlohmann::json& j, bool color) {
  std::printf("job %s: %s, round %d (attempt %d), restarts %d of %d, nodes %zu (min %d, max %d)\n",
              j["run_id"].get<std::string>().c_str(),
              Paint(j["phase"].get<std::string>(), color).c_str(), j["round"].get<int>(),
              j.value("attempt", 0), j["restarts_used"].get<int>(), j["max_restarts"].get<int>(),
              j["nodes"].size(), j["min_nodes"].get<int>(), j["max_nodes"].get<int>());
  PrintTiming(j);
  if (j.contains("straggler")) {
    std::printf("straggler: %s\n", j["straggler"].value("line", "").c_str());
  }
  for (const auto& p : j.value("preempting", nlohmann::json::array())) {
    std::printf("preempting node %s (%s): %s\n", p["host"].get<std::string>().c_str(),
                p["node_id"].get<std::string>().c_str(), p["reason"].get<std::string>().c_str());
  }
  std::printf("%-11s %-6s %-9s %-20s %s\n", "CONDITION", "STATUS", "SINCE", "REASON", "MESSAGE");
  for (const auto& c : j["conditions"]) {
    std::string status = c["status"].get<std::string>();
    std::printf("%-11s %s %-9s %-20s %s\n", c["type"].get<std::string>().c_str(),
                PaintPadded(status, 6, color && status == "True").c_str(),
                TimeOfDay(c["last_transition_time"].get<std::string>()).c_str(),
                c["reason"].get<std::string>().c_str(), c["message"].get<std::string>().c_str());
  }
  // Ranks grouped by node: each node's line, then its workers.
  std::map<std::string, std::vector<const nlohmann::json*>> by_node;
  for (const auto& w : j["workers"]) by_node[w["node_id"].get<std::string>()].push_back(&w);
  std::printf("%-6s %-24s %-18s %-12s %-10s %s\n", "GROUP", "HOST", "ADDRESS", "RANKS", "STATE",
              "NODE");
  for (const auto& n : j["nodes"]) {
    std::string ranks = n.contains("ranks")
                            ? absl::StrCat(n["ranks"][0].get<int>(), "-", n["ranks"][1].get<int>())
                        : n.value("state", "") == "Quarantined" ? "quarantined"
                        : n.value("excluded", "").empty()       ? "waiting"
                                                                : "excluded";
    std::string group =
        n["group_rank"].get<int>() >= 0 ? std::to_string(n["group_rank"].get<int>()) : "-";
    std::string node_id = n["node_id"].get<std::string>();
    std::printf("%-6s %-24s %-18s %-12s %s %s\n", group.c_str(),
                n["host"].get<std::string>().c_str(), n["address"].get<std::string>().c_str(),
                ranks.c_str(), PaintPadded(n.value("state", ""), 10, color).c_str(),
                node_id.c_str());
    const std::pair<const char*, const char*> kExtras[] = {{"excluded", "excluded"},
                                                           {"probe", "gpu"},
                                                           {"command", "command"},
                                                           {"log_dir", "logs"},
                                                           {"containment", "containment"}};
    for (const auto& [key, label] : kExtras) {
      if (!n.value(key, "").empty()) {
        std::printf("       %s: %s\n", label, n[key].get<std::string>().c_str());
      }
    }
    for (const nlohmann::json* w : by_node[node_id]) {
      std::string pid = (*w)["pid"].get<int>() > 0 ? std::to_string((*w)["pid"].get<int>()) : "-";
      std::string state = (*w)["state"].get<std::string>();
      // How it was started (docs/guides/warm-start.md), and why not forked where asked.
      std::string start = w->value("start", "");
      if (!start.empty()) start = absl::StrCat(" ", start);
      if (w->contains("fallback")) {
        absl::StrAppend(&start, " (", (*w)["fallback"].get<std::string>(), ")");
      }
      std::printf("       rank %-5d local %-3d pid %-8s %s restarts %d%s%s%s\n",
                  (*w)["rank"].get<int>(), (*w)["local_rank"].get<int>(), pid.c_str(),
                  PaintPadded(state, 9, color).c_str(), (*w)["restarts"].get<int>(), start.c_str(),
                  w->contains("what") ? "  " : "",
                  w->contains("what") ? (*w)["what"].get<std::string>().c_str() : "");
    }
  }
  for (const auto& h : j["history"]) {
    std::string ran = h.contains("duration_s") ? ", ran " + SecondsText(h["duration_s"]) : "";
    std::printf("restart after round %d (attempt %d%s%s): %s\n", h["round"].get<int>(),
                h.value("attempt", 0), h["counted"].get<bool>() ? ", counted" : "", ran.c_str(),
                h["reason"].get<std::string>().c_str());
  }
  if (j.contains("outcome")) {
    std::printf("outcome: exit %d: %s\n", j["outcome"]["exit_code"].get<int>(),
                j["outcome"]["reason"].get<std::string>().c_str());
  }
  PrintTraces(j);
  PrintRootCauseStderr(j);
}

nlohmann::json ToJson(const rdzv::JobSummary& s) {
  nlohmann::json j = {{"run_id", s.run_id},
                      {"phase", rdzv::JobPhaseName(s.phase)},
                      {"round", s.round},
                      {"restarts_used", s.restarts_used},
                      {"max_restarts", s.max_restarts},
                      {"nodes", s.nodes},
                      {"min_nodes", s.min_nodes},
                      {"max_nodes", s.max_nodes}};
  if (s.outcome) {
    j["outcome"] = {{"exit_code", s.outcome->exit_code}, {"reason", s.outcome->reason}};
  }
  return j;
}

// `muster status` without a run id: the server's jobs, a line each.
int PrintJobList(JobQuery& query, bool json) {
  absl::StatusOr<std::vector<rdzv::JobSummary>> jobs = query.ListJobs();
  if (!jobs.ok()) {
    std::fprintf(stderr, "muster status: cannot list the jobs of %s: %s\n", query.Where().c_str(),
                 std::string(jobs.status().message()).c_str());
    return exit_code::kTransient;
  }
  if (json) {
    nlohmann::json list = nlohmann::json::array();
    for (const rdzv::JobSummary& s : *jobs) list.push_back(ToJson(s));
    std::printf("%s\n", nlohmann::json{{"jobs", list}}.dump(2).c_str());
    return 0;
  }
  if (jobs->empty()) {
    std::printf("no jobs at %s yet (a job appears when its first agent joins)\n",
                query.Where().c_str());
    return 0;
  }
  bool color = isatty(STDOUT_FILENO);
  std::printf("%-24s %-10s %-6s %-10s %-9s %s\n", "RUN ID", "PHASE", "ROUND", "NODES", "RESTARTS",
              "OUTCOME");
  for (const rdzv::JobSummary& s : *jobs) {
    std::string nodes = s.min_nodes == s.max_nodes
                            ? absl::StrCat(s.nodes, "/", s.max_nodes)
                            : absl::StrCat(s.nodes, "/", s.min_nodes, ":", s.max_nodes);
    std::string outcome =
        s.outcome ? absl::StrCat("exit ", s.outcome->exit_code, ": ", s.outcome->reason) : "";
    std::printf("%-24s %s %-6d %-10s %-9s %s\n", s.run_id.c_str(),
                PaintPadded(rdzv::JobPhaseName(s.phase), 10, color).c_str(), s.round, nodes.c_str(),
                absl::StrCat(s.restarts_used, "/", s.max_restarts).c_str(), outcome.c_str());
  }
  std::printf("`muster status --rdzv-endpoint %s --rdzv-id ID` shows one job\n",
              query.Where().c_str());
  return 0;
}

void PrintStatus(const rdzv::JobStatusSnapshot& status, bool json) {
  nlohmann::json j = ToJson(status);
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    PrintTable(j, isatty(STDOUT_FILENO));
  }
}

}  // namespace

const Subcommand& StatusSubcommand() { return kStatus; }

int StatusCommand(const std::vector<std::string>& args,
                  const std::map<std::string, std::string>& env) {
  int code = exit_code::kSuccess;
  std::optional<FlagValues> values = StartSubcommand(kStatus, args, env, &code);
  if (!values) return code;
  bool json = values->Get("json").has_value();
  absl::StatusOr<const RendezvousBackend*> backend = BackendFromFlags(*values);
  if (!backend.ok()) return UsageError(kStatus, backend.status().message());
  absl::StatusOr<std::unique_ptr<JobQuery>> parsed = (*backend)->Query(*values);
  if (!parsed.ok()) return UsageError(kStatus, parsed.status().message());
  JobQuery& query = **parsed;
  if (query.run_id().empty()) {
    if (values->Get("watch")) {
      return UsageError(kStatus,
                        "--watch: follows one job; give it with --rdzv-id (without "
                        "--watch, `muster status` lists the server's jobs)");
    }
    return PrintJobList(query, json);
  }
  if (values->Get("watch")) {
    bool color = isatty(STDOUT_FILENO);
    absl::Status watched = query.Watch([&](const rdzv::JobStatusSnapshot& s) {
      nlohmann::json j = ToJson(s);
      if (json) {
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("--- %s\n",
                    absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone()).c_str());
        PrintTable(j, color);
      }
      std::fflush(stdout);
    });
    if (!watched.ok()) {
      std::fprintf(stderr, "muster status: watching job %s at %s: %s\n", query.run_id().c_str(),
                   query.Where().c_str(), std::string(watched.message()).c_str());
      return watched.code() == absl::StatusCode::kNotFound ? kNoSuchJob : exit_code::kTransient;
    }
    return 0;
  }
  absl::StatusOr<rdzv::JobStatusSnapshot> status = query.Status();
  if (!status.ok()) {
    std::fprintf(stderr, "muster status: cannot get job %s %s: %s\n", query.run_id().c_str(),
                 query.From(QueryCommand::kStatus).c_str(),
                 std::string(status.status().message()).c_str());
    return status.status().code() == absl::StatusCode::kNotFound ? kNoSuchJob
                                                                 : exit_code::kTransient;
  }
  PrintStatus(*status, json);
  return 0;
}

}  // namespace muster

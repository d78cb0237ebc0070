// Job (job.h): the flight recorder dumps the server collected of a failed round
// (docs/guides/collective-traces.md). The files are the server's (rendezvous/registry/trace_store);
// the job keeps what is where, for the status and for the nodes that wait for it before exiting.
#include <algorithm>

#include "rendezvous/core/job.h"

namespace muster::rdzv {
namespace {

bool Contains(const std::vector<std::string>& ids, const std::string& id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// `traces`' record of `round`, made in round order; null when older than those kept.
TraceRound* RoundRecord(std::vector<TraceRound>& traces, int round, size_t keep) {
  auto at = std::find_if(traces.begin(), traces.end(),
                         [round](const TraceRound& r) { return r.round == round; });
  if (at != traces.end()) return &*at;
  if (!traces.empty() && traces.front().round > round) return nullptr;
  at = traces.insert(std::upper_bound(traces.begin(), traces.end(), round,
                                      [](int n, const TraceRound& r) { return n < r.round; }),
                     TraceRound{.round = round});
  if (traces.size() <= keep) return &*at;
  const bool dropped_this = at == traces.begin();
  traces.erase(traces.begin());
  return dropped_this ? nullptr : RoundRecord(traces, round, keep);
}

}  // namespace

void Job::TracesStored(const std::string& node_id, int round, const std::string& location,
                       TraceNode stored, const std::string& error, absl::Time now,
                       std::vector<Event>* out) {
  auto it = nodes_.find(node_id);
  if (it == nodes_.end() || round <= 0 || round > round_) return;
  Touch(it->second, now);
  TraceRound* r = RoundRecord(traces_, round, kMaxTraceRounds);
  if (r == nullptr || Contains(r->reported, node_id)) return;
  r->reported.push_back(node_id);
  if (r->location.empty()) r->location = location;
  stored.node_id = node_id;
  stored.host = it->second.info.host;
  if (!stored.files.empty() || !stored.note.empty()) r->nodes.push_back(std::move(stored));

  // Who waits for it: the round's nodes still connected (an older round's: the uploader).
  std::vector<std::string> to;
  for (const NodeInfo& p : round == round_ ? participants_ : std::vector<NodeInfo>{}) {
    auto n = nodes_.find(p.node_id);
    if (n != nodes_.end() && !n->second.left) to.push_back(p.node_id);
  }
  if (!Contains(to, node_id)) to.push_back(node_id);
  TracesSummary summary{
      .round = round, .location = r->location, .nodes_expected = static_cast<int>(to.size())};
  for (const TraceNode& n : r->nodes) {
    summary.nodes += n.files.empty() ? 0 : 1;
    summary.files += static_cast<int>(n.files.size());
    for (size_t i = 0; r->location.empty() && i < n.files.size(); ++i) {
      if (summary.left_on_nodes.size() < kMaxListedPaths)
        summary.left_on_nodes.push_back(n.files[i]);
    }
  }
  for (const std::string& id : to) summary.nodes_reported += Contains(r->reported, id) ? 1 : 0;
  // The uploader hears what is stored so far; every node once all have reported: O(nodes)
  // events per round, not O(nodes^2).
  if (summary.nodes_reported < summary.nodes_expected) to = {node_id};
  for (const std::string& id : to) {
    Event e = MakeEvent(Event::Kind::kTraces, id);
    e.traces = summary;
    if (id == node_id) e.traces.error = error;
    out->push_back(std::move(e));
  }
}

}  // namespace muster::rdzv

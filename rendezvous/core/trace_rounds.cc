// TraceRounds (trace_rounds.h): the flight recorder dumps the server collected of a failed
// round (docs/guides/collective-traces.md). The files are the server's
// (rendezvous/registry/trace_store); this keeps what is where, for the status and for the
// nodes that wait for it before exiting.
#include "rendezvous/core/trace_rounds.h"

#include <algorithm>
#include <utility>

namespace muster::rdzv {
namespace {

bool Reported(const TraceRound& r, const std::string& id) {
  return std::find(r.reported.begin(), r.reported.end(), id) != r.reported.end();
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

const TraceRound* TraceRounds::Report(int round, const std::string& node_id,
                                      const std::string& host, const std::string& location,
                                      TraceNode stored) {
  TraceRound* r = RoundRecord(rounds_, round, kMaxRounds);
  if (r == nullptr || Reported(*r, node_id)) return nullptr;
  r->reported.push_back(node_id);
  if (r->location.empty()) r->location = location;
  stored.node_id = node_id;
  stored.host = host;
  if (!stored.files.empty() || !stored.note.empty()) r->nodes.push_back(std::move(stored));
  return r;
}

TracesSummary TraceRounds::Summarize(const TraceRound& r, const std::vector<std::string>& waiting) {
  TracesSummary summary{
      .round = r.round, .location = r.location, .nodes_expected = static_cast<int>(waiting.size())};
  for (const TraceNode& n : r.nodes) {
    summary.nodes += n.files.empty() ? 0 : 1;
    summary.files += static_cast<int>(n.files.size());
    for (size_t i = 0; r.location.empty() && i < n.files.size(); ++i) {
      if (summary.left_on_nodes.size() < kMaxListedPaths)
        summary.left_on_nodes.push_back(n.files[i]);
    }
  }
  for (const std::string& id : waiting) summary.nodes_reported += Reported(r, id) ? 1 : 0;
  return summary;
}

}  // namespace muster::rdzv

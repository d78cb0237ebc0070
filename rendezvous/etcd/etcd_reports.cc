#include "rendezvous/etcd/etcd_reports.h"

#include "absl/strings/str_cat.h"

namespace muster::rdzv::etcd {

v1::AgentMessage TracesReport(const std::string& host, const std::vector<TraceChunk>& chunks) {
  v1::AgentMessage m;
  v1::TraceChunk* done = m.mutable_traces();
  for (const TraceChunk& c : chunks) {
    if (c.offset == 0 && !c.file.empty())
      done->add_paths(absl::StrCat(host, ":", chunks.back().dir, "/", c.file));
  }
  done->set_round(chunks.back().round);
  done->set_done(true);
  done->set_note(chunks.back().note);
  return m;
}

}  // namespace muster::rdzv::etcd

#include "rendezvous/wire/traces_convert.h"

#include "muster/v1/rendezvous.pb.h"

namespace muster::rdzv::wire {

void ToProto(const TraceChunk& in, v1::TraceChunk* out) {
  out->set_round(in.round);
  out->set_file(in.file);
  out->set_offset(in.offset);
  out->set_data(in.data);
  out->set_done(in.done);
  out->set_note(in.note);
  for (const std::string& p : in.paths) out->add_paths(p);
}

TraceChunk FromProto(const v1::TraceChunk& in) {
  return TraceChunk{.round = in.round(),
                    .file = in.file(),
                    .offset = in.offset(),
                    .data = in.data(),
                    .done = in.done(),
                    .note = in.note(),
                    .paths = {in.paths().begin(), in.paths().end()}};
}

void ToProto(const TracesSummary& in, v1::TracesStored* out) {
  out->set_round(in.round);
  out->set_location(in.location);
  out->set_nodes(in.nodes);
  out->set_files(in.files);
  out->set_nodes_reported(in.nodes_reported);
  out->set_nodes_expected(in.nodes_expected);
  out->set_error(in.error);
  for (const std::string& p : in.left_on_nodes) out->add_left_on_nodes(p);
}

TracesSummary FromProto(const v1::TracesStored& in) {
  return TracesSummary{.round = in.round(),
                       .location = in.location(),
                       .nodes = in.nodes(),
                       .files = in.files(),
                       .nodes_reported = in.nodes_reported(),
                       .nodes_expected = in.nodes_expected(),
                       .error = in.error(),
                       .left_on_nodes = {in.left_on_nodes().begin(), in.left_on_nodes().end()}};
}

void ToProto(const TraceRound& in, v1::TraceRound* out) {
  out->set_round(in.round);
  out->set_location(in.location);
  for (const TraceNode& n : in.nodes) {
    v1::TraceNode* p = out->add_nodes();
    p->set_node_id(n.node_id);
    p->set_host(n.host);
    for (const std::string& f : n.files) p->add_files(f);
    p->set_bytes(n.bytes);
    p->set_note(n.note);
  }
}

TraceRound FromProto(const v1::TraceRound& in) {
  TraceRound out{.round = in.round(), .location = in.location()};
  for (const v1::TraceNode& p : in.nodes()) {
    out.nodes.push_back(TraceNode{.node_id = p.node_id(),
                                  .host = p.host(),
                                  .files = {p.files().begin(), p.files().end()},
                                  .bytes = p.bytes(),
                                  .note = p.note()});
  }
  return out;
}

}  // namespace muster::rdzv::wire

#include "rendezvous/wire/stacks_convert.h"

#include "muster/v1/rendezvous.pb.h"

namespace muster::rdzv::wire {

void ToProto(const RankStack& in, v1::RankStack* out) {
  out->set_rank(in.rank);
  out->set_local_rank(in.local_rank);
  out->set_pid(in.pid);
  out->set_text(in.text);
  out->set_unavailable(in.unavailable);
}

RankStack FromProto(const v1::RankStack& in) {
  return RankStack{.rank = in.rank(),
                   .local_rank = in.local_rank(),
                   .pid = in.pid(),
                   .text = in.text(),
                   .unavailable = in.unavailable()};
}

void ToProto(const NodeStacks& in, v1::NodeStacks* out) {
  out->set_node_id(in.node_id);
  out->set_host(in.host);
  out->set_group_rank(in.group_rank);
  out->set_unavailable(in.unavailable);
  for (const RankStack& r : in.ranks) ToProto(r, out->add_ranks());
}

NodeStacks FromProto(const v1::NodeStacks& in) {
  NodeStacks out{.node_id = in.node_id(),
                 .host = in.host(),
                 .group_rank = in.group_rank(),
                 .unavailable = in.unavailable()};
  for (const v1::RankStack& r : in.ranks()) out.ranks.push_back(FromProto(r));
  return out;
}

void ToProto(int round, const Stall& in, v1::Stalled* out) {
  out->set_round(round);
  out->set_stalled(in.stalled);
  out->set_restartable(in.restartable);
  for (const RankStack& r : in.ranks) ToProto(r, out->add_ranks());
}

Stall FromProto(const v1::Stalled& in) {
  Stall out{.stalled = in.stalled(), .restartable = in.restartable()};
  for (const v1::RankStack& r : in.ranks()) out.ranks.push_back(FromProto(r));
  return out;
}

void ToProto(int round, const StragglerSample& in, v1::StragglerSample* out) {
  out->set_round(round);
  out->set_tick(in.tick);
  out->set_window(in.window);
  out->set_share(in.share);
  for (const RankStack& r : in.ranks) ToProto(r, out->add_ranks());
}

StragglerSample FromProto(const v1::StragglerSample& in) {
  StragglerSample out{.tick = in.tick(), .window = in.window(), .share = in.share()};
  for (const v1::RankStack& r : in.ranks()) out.ranks.push_back(FromProto(r));
  return out;
}

void ToProto(const StragglerVerdict& in, v1::Straggler* out) {
  out->set_rank(in.rank);
  out->set_local_rank(in.local_rank);
  out->set_node_id(in.node_id);
  out->set_host(in.host);
  out->set_share(in.share);
  out->set_samples(in.samples);
  out->set_stack(in.stack);
  out->set_line(in.line);
}

StragglerVerdict FromProto(const v1::Straggler& in) {
  return StragglerVerdict{.rank = in.rank(),
                          .local_rank = in.local_rank(),
                          .node_id = in.node_id(),
                          .host = in.host(),
                          .share = in.share(),
                          .samples = in.samples(),
                          .stack = in.stack(),
                          .line = in.line()};
}

}  // namespace muster::rdzv::wire

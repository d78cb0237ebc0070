// Conversions between the stacks' plain data (core/stacks.h) and the muster.v1 messages.
// Internal to rendezvous/, like proto_convert.h.
#ifndef MUSTER_RENDEZVOUS_WIRE_STACKS_CONVERT_H_
#define MUSTER_RENDEZVOUS_WIRE_STACKS_CONVERT_H_

#include "rendezvous/core/hang.h"
#include "rendezvous/core/stacks.h"
#include "rendezvous/core/straggler.h"

namespace muster::v1 {
class RankStack;
class NodeStacks;
class Stalled;
class StragglerSample;
class Straggler;
}  // namespace muster::v1

namespace muster::rdzv::wire {

void ToProto(const RankStack& in, v1::RankStack* out);
RankStack FromProto(const v1::RankStack& in);
// The node's identity (node_id, host, group_rank, unavailable) and its ranks.
void ToProto(const NodeStacks& in, v1::NodeStacks* out);
NodeStacks FromProto(const v1::NodeStacks& in);
// A node's hang report (hang.h) of `round`.
void ToProto(int round, const Stall& in, v1::Stalled* out);
Stall FromProto(const v1::Stalled& in);
// A node's straggler sample (straggler.h) of `round`, and the job's verdict.
void ToProto(int round, const StragglerSample& in, v1::StragglerSample* out);
StragglerSample FromProto(const v1::StragglerSample& in);
void ToProto(const StragglerVerdict& in, v1::Straggler* out);
StragglerVerdict FromProto(const v1::Straggler& in);

}  // namespace muster::rdzv::wire

#endif  // MUSTER_RENDEZVOUS_WIRE_STACKS_CONVERT_H_

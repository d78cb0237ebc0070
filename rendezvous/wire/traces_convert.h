// Conversions between the flight recorder traces' plain data (core/traces.h) and the
// muster.v1 messages. Internal to rendezvous/, like proto_convert.h.
#ifndef MUSTER_RENDEZVOUS_WIRE_TRACES_CONVERT_H_
#define MUSTER_RENDEZVOUS_WIRE_TRACES_CONVERT_H_

#include "rendezvous/core/traces.h"

namespace muster::v1 {
class TraceChunk;
class TracesStored;
class TraceRound;
}  // namespace muster::v1

namespace muster::rdzv::wire {

void ToProto(const TraceChunk& in, v1::TraceChunk* out);
TraceChunk FromProto(const v1::TraceChunk& in);
void ToProto(const TracesSummary& in, v1::TracesStored* out);
TracesSummary FromProto(const v1::TracesStored& in);
void ToProto(const TraceRound& in, v1::TraceRound* out);
TraceRound FromProto(const v1::TraceRound& in);

}  // namespace muster::rdzv::wire

#endif  // MUSTER_RENDEZVOUS_WIRE_TRACES_CONVERT_H_

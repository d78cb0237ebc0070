// Conversions between rendezvous plain data (core/types.h, core/job_status.h) and the
// muster.v1 messages, for every backend that carries them (rendezvous/grpc's streams,
// rendezvous/etcd's keys). Internal to rendezvous/: the messages are only forward-declared
// here so that no generated header leaks past the backends' .cc files.
#ifndef MUSTER_RENDEZVOUS_WIRE_PROTO_CONVERT_H_
#define MUSTER_RENDEZVOUS_WIRE_PROTO_CONVERT_H_

#include <string>
#include <vector>

#include "rendezvous/core/job_status.h"
#include "rendezvous/core/types.h"

namespace muster::v1 {
class Join;
class Failure;
class ServerMessage;
class JobStatusReply;
class JobSummary;
class WorkersStarted;
class WorkerEnded;
}  // namespace muster::v1

namespace muster::rdzv::wire {

void ToProto(const NodeInfo& node, const JobSpec& spec, v1::Join* out);
void FromProto(const v1::Join& in, NodeInfo* node, JobSpec* spec);

void ToProto(const Failure& failure, v1::Failure* out);
Failure FromProto(const v1::Failure& in);

// kProgress/kRoundStarted/kStopWorkers/kFinished <-> ServerMessage. FromProto returns
// false for a message that is not an event (Error, or unset); `node_id` fills
// Event::node_id, which the wire does not carry.
void ToProto(const Event& event, v1::ServerMessage* out);
bool FromProto(const v1::ServerMessage& in, const std::string& node_id, Event* out);

void ToProto(int round, const std::vector<StartedWorker>& workers, v1::WorkersStarted* out);
std::vector<StartedWorker> FromProto(const v1::WorkersStarted& in);
void ToProto(int round, const EndedWorker& worker, v1::WorkerEnded* out);
EndedWorker FromProto(const v1::WorkerEnded& in);

void ToProto(const JobStatusSnapshot& status, v1::JobStatusReply* out);
JobStatusSnapshot FromProto(const v1::JobStatusReply& in);

void ToProto(const JobSummary& summary, v1::JobSummary* out);
JobSummary FromProto(const v1::JobSummary& in);

}  // namespace muster::rdzv::wire

#endif  // MUSTER_RENDEZVOUS_WIRE_PROTO_CONVERT_H_

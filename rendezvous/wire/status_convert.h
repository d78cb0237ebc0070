// The one place where grpc::Status and absl::Status meet (STYLE: tensorstore's gRPC
// layer), for both backends that speak gRPC (rendezvous/grpc, and rendezvous/etcd's etcd
// v3 client), and the status code a message carries (ServerMessage.Error, EtcdAnswer).
// Both use the canonical google.rpc codes, so the code maps one to one; the message is
// kept verbatim.
#ifndef MUSTER_RENDEZVOUS_WIRE_STATUS_CONVERT_H_
#define MUSTER_RENDEZVOUS_WIRE_STATUS_CONVERT_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace muster::rdzv::wire {

absl::Status ToAbslStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);
// A code carried inside a message (ServerMessage.Error.code); unknown values become kUnknown.
absl::StatusCode ToAbslCode(int code);
// The code to carry inside a message; ToAbslCode reads it back.
int ToWireCode(absl::StatusCode code);

}  // namespace muster::rdzv::wire

#endif  // MUSTER_RENDEZVOUS_WIRE_STATUS_CONVERT_H_

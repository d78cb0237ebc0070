// Agent reports the etcd backend builds itself rather than converting one-to-one from the
// gRPC session's messages (docs/guides/etcd.md, docs/guides/collective-traces.md).
#pragma once

#include <string>
#include <vector>

#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/core/traces.h"

namespace muster::rdzv::etcd {

// The done chunk only, naming "HOST:PATH" of every file the chunks hold: etcd values are too
// small for the dumps themselves, so the job is told where each file stays.
v1::AgentMessage TracesReport(const std::string& host, const std::vector<TraceChunk>& chunks);

}  // namespace muster::rdzv::etcd

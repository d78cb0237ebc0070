// The chunks an agent sends the job with its workers' flight recorder dumps of a failed
// round (docs/guides/collective-traces.md): every file in order, cut into kMaxTraceChunkBytes
// pieces, at most kMaxTraceBytesPerNode (8 MiB) and kMaxTraceFilesPerNode files in all (the
// first files by name, a file cut at the limit: its tail is left out); the last chunk is
// `done` and its note says what was truncated or skipped and why. Reads the files; no
// other effect. Thread-safe.
#ifndef MUSTER_AGENT_TRACE_UPLOAD_H_
#define MUSTER_AGENT_TRACE_UPLOAD_H_

#include <string>
#include <vector>

#include "rendezvous/core/traces.h"

namespace muster {

// `files`: full paths (FlightRecorderDumps) in `dir`. With no files: one `done` chunk.
std::vector<rdzv::TraceChunk> TraceUploadChunks(int round, const std::string& dir,
                                                const std::vector<std::string>& files);

}  // namespace muster

#endif  // MUSTER_AGENT_TRACE_UPLOAD_H_

// Flight recorder dumps collected from every node of a failed round (issue 17 item 3,
// docs/guides/collective-traces.md), as plain data: what an agent sends (TraceChunk), what the
// server stored for one node (TraceNode) and for one round (TraceRound), and what every node of the
// round is told (TracesSummary). No I/O here: rendezvous/registry/trace_store writes.
#ifndef MUSTER_RENDEZVOUS_CORE_TRACES_H_
#define MUSTER_RENDEZVOUS_CORE_TRACES_H_

#include <cstdint>
#include <string>
#include <vector>

namespace muster::rdzv {

// Limits of one node's upload per round, kept by the agent and checked by the server.
inline constexpr int64_t kMaxTraceChunkBytes = 1 << 20;    // under gRPC's 4 MiB message
inline constexpr int64_t kMaxTraceBytesPerNode = 8 << 20;  // all files of one round
inline constexpr int kMaxTraceFilesPerNode = 64;

// A piece of one dump file; chunks of a file come in order. `done` ends the node's upload
// of `round` (it may carry no data: a node without dumps says so too).
struct TraceChunk {
  int round = 0;
  std::string file;  // a plain file name, no '/'
  int64_t offset = 0;
  std::string data;
  bool done = false;
  std::string note;  // with done: what the agent truncated or skipped, and why
  // With done: the folder the files are in on this node (not sent; a backend that carries
  // no data, etcd, sends `paths` instead).
  std::string dir;
  std::vector<std::string> paths;  // "HOST:PATH" of each file left on the node (etcd)

  bool operator==(const TraceChunk&) const = default;
};

// One node's stored files of a round.
struct TraceNode {
  std::string node_id;
  std::string host;
  std::vector<std::string> files;  // relative to the round's location: "<node dir>/<file>"
  int64_t bytes = 0;
  std::string note;  // truncated or skipped (agent's or server's), and why

  bool operator==(const TraceNode&) const = default;
};

// A round's dumps on the server: "HOST:DIR/" and every node that uploaded.
struct TraceRound {
  int round = 0;
  std::string location;
  std::vector<TraceNode> nodes;
  std::vector<std::string> reported;  // node ids whose upload is complete

  bool operator==(const TraceRound&) const = default;
};

// What the job tells the nodes of a round after each node's upload (Event::kTraces).
struct TracesSummary {
  int round = 0;
  std::string location;
  int nodes = 0;  // with files
  int files = 0;
  int nodes_reported = 0;
  int nodes_expected = 0;
  std::string error;  // for the uploading node only: its files were not stored
  // Without a location (etcd: nothing collected), the first kMaxListedPaths "HOST:PATH"s of
  // the files left on their nodes.
  std::vector<std::string> left_on_nodes;

  bool operator==(const TracesSummary&) const = default;
};
inline constexpr size_t kMaxListedPaths = 8;

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_TRACES_H_

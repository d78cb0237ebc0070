// StackReport: `muster stacks`' reading of the job's stacks (docs/guides/hangs-and-stacks.md
// "Stacks"). Parses faulthandler's text per rank, picks each rank's main thread (the one running
// the script's <module>), and groups ranks with identical main-thread stacks:
//   ranks 0-2: all_reduce <- c10d_logger.py:81 wrapper <- train.py:57 step
//   rank 3: stuck_here <- train.py:40 step
// Ranks without a stack are grouped by their reason. Pure functions; thread-safe.
#ifndef MUSTER_AGENT_STACK_REPORT_H_
#define MUSTER_AGENT_STACK_REPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "nlohmann/json.hpp"
#include "rendezvous/core/stacks.h"

namespace muster {

struct StackFrame {
  std::string file;
  int line = 0;
  std::string function;
  bool operator==(const StackFrame&) const = default;
};

struct ThreadStack {
  std::string id;                  // "0x00007f7c38b2f040"
  bool current = false;            // faulthandler's "Current thread": the one that took the signal
  std::vector<StackFrame> frames;  // most recent call first
};

// faulthandler's dump (one or more, all_threads=True) -> its threads, in the order written.
// Lines it does not know ("<no Python frame>", "...") are skipped, and so are a warm rank's
// frames below its script (the template's, kWarmTemplateFileName, and outer ones).
std::vector<ThreadStack> ParseFaulthandler(std::string_view text);

// The thread running the script: the one whose outermost frame is <module>, else the
// current thread, else the first; nullptr when there is none.
const ThreadStack* MainThread(const std::vector<ThreadStack>& threads);

// "all_reduce <- c10d_logger.py:81 wrapper <- train.py:57 step": the innermost function,
// then each caller's file (base name), line and function, at most `max_frames` frames.
std::string OneLine(const std::vector<StackFrame>& frames, size_t max_frames = 8);

// Each rank's main-thread stack in one line (OneLine), or its reason for having none: what
// hang detection and stragglers compare (rendezvous/core/hang.h, rendezvous/core/straggler.h).
std::vector<rdzv::RankStack> MainThreadLines(const std::vector<rdzv::RankStack>& ranks);

// "0-6,8,10-11"
std::string RankRanges(std::vector<int> ranks);

// One group of ranks with the same main-thread stack (or the same reason for having none).
struct StackGroup {
  std::vector<int> ranks;
  std::vector<StackFrame> frames;  // the shared main-thread stack; empty for `unavailable`
  std::string unavailable;
};

// Groups every rank of every node: stacks first (largest group first, then by lowest
// rank), then ranks without one. A node that did not answer adds no ranks (see
// StacksJson's "nodes").
std::vector<StackGroup> GroupStacks(const std::vector<rdzv::NodeStacks>& nodes);

// The text `muster stacks` prints: a line per group, the group's stack under it, and a line
// per node that did not answer.
std::string RenderStacks(const std::vector<rdzv::NodeStacks>& nodes);

// --json: {"nodes": [... every rank's raw text and parsed threads ...], "groups": [...]}.
nlohmann::json StacksJson(const std::vector<rdzv::NodeStacks>& nodes);

}  // namespace muster

#endif  // MUSTER_AGENT_STACK_REPORT_H_

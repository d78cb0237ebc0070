// Collective traces (issue 17 item 3, docs/guides/collective-traces.md): every worker gets torch's
// flight recorder settings unless the user set them (either spelling of each), so that a
// collective that times out or fails leaves a trace per rank in the attempt's directory,
// and a worker's failure names the trace files found there. Names checked against torch
// 2.15 (torch/csrc/distributed/c10d/FlightRecorder.hpp: TORCH_FR_* first, the older
// TORCH_NCCL_* aliases that torch 2.2-2.9 read). Plain functions; thread-safe.
// Verified again on 2026-11-26 in the torch 2.15.0+cu132 wheel (scripts/torch2_venv.sh):
// FlightRecorder.hpp reads {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"}
// (default 2000) and {"TORCH_FR_DUMP_ON_TIMEOUT", "TORCH_NCCL_DUMP_ON_TIMEOUT"}, and says
// the dump goes to <TORCH_FR_DUMP_TEMP_FILE><rank>; libtorch_cpu.so holds the strings
// TORCH_FR_DUMP_TEMP_FILE and TORCH_NCCL_DEBUG_INFO_TEMP_FILE; ProcessGroupNCCL.hpp still
// reads TORCH_NCCL_DUMP_ON_TIMEOUT and TORCH_NCCL_TRACE_BUFFER_SIZE by those names alone.
#ifndef MUSTER_AGENT_FLIGHT_RECORDER_H_
#define MUSTER_AGENT_FLIGHT_RECORDER_H_

#include <optional>
#include <string>
#include <vector>

#include "agent/workers/torch_names.h"

namespace muster {

// A rank's dump is <attempt dir>/<this><rank> (torch appends the rank to the prefix).
inline constexpr char kFlightRecorderFilePrefix[] = "flight_recorder_rank_";

// Sets, where neither name of a pair is in `env` ("NAME=value", sorted by name): the
// buffer size (2000 entries, torch 2.15's default), dump on timeout (1) and the dump file
// prefix (<attempt_dir>/flight_recorder_rank_), each under the name `torch` (the workers')
// reads: TORCH_FR_* from 2.10, TORCH_NCCL_* before, both when it is unknown.
void AddFlightRecorderEnv(const std::string& attempt_dir, const std::optional<TorchVersion>& torch,
                          std::vector<std::string>* env);

// The trace files in `attempt_dir` (full paths, sorted); empty when there are none.
std::vector<std::string> FlightRecorderDumps(const std::string& attempt_dir);

// " (flight recorder traces: /run/attempt_0/flight_recorder_rank_0, ...)", or "" when the
// directory of the worker directory `worker_dir` (its attempt's) holds none.
std::string FlightRecorderNote(const std::string& worker_dir);

}  // namespace muster

#endif  // MUSTER_AGENT_FLIGHT_RECORDER_H_

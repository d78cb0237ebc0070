// The spellings that depend on the workers' torch version: environment variables torch
// renamed (a worker's torch warns once per rank when it finds an old name, and older torch
// reads only the old one) and torch.distributed.launch's local rank argument. Each is set
// under the name the workers' torch reads; where that torch is unknown
// (agent/workers/worker_torch.h found none), under every name, as before. Thread-safe (constant
// data, pure functions).
#ifndef MUSTER_AGENT_TORCH_NAMES_H_
#define MUSTER_AGENT_TORCH_NAMES_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/torch_version.h"

namespace muster {

// "2.15.0+cu132", "1.13.0a0", "2.6" -> {2, 15}, {1, 13}, {2, 6}; nullopt for anything else.
std::optional<TorchVersion> ParseTorchVersion(std::string_view text);

// A variable torch renamed: `name` is read from `renamed_in` on (older releases read only
// `old_name`; newer ones read both and warn about `old_name`).
struct RenamedVariable {
  const char* name;
  const char* old_name;
  TorchVersion renamed_in;
};

// torch 2.2 renamed NCCL_ASYNC_ERROR_HANDLING (torch_contract.md §5.2: 1.13 reads only the
// old name, 2.6 and 2.14 torchrun set only the new one).
inline constexpr RenamedVariable kAsyncErrorHandling = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING", {2, 2}};

// The names to set for workers running `torch`: the one it reads, or both when unknown.
std::vector<const char*> NamesFor(const RenamedVariable& variable,
                                  const std::optional<TorchVersion>& torch);

// torch.distributed.launch's argument to the script: "--local-rank=N" from torch 2.0 on
// (and when the torch is unknown: today's spelling), "--local_rank=N" before.
std::string LegacyLocalRankArgument(const std::optional<TorchVersion>& torch, int local_rank);

}  // namespace muster

#endif  // MUSTER_AGENT_TORCH_NAMES_H_

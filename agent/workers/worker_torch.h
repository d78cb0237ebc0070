// WorkerTorch: which torch the workers will import, asked once before the first round of
// the interpreter that runs them. importlib's find_spec locates the torch package without
// importing it and its version.py is read as text: about 20 ms, against seconds for
// `import torch`. torch_names.h turns the answer into the spellings that depend on it
// (renamed environment variables, torch.distributed.launch's --local-rank argument).
// Plain functions; call from the main thread before the agent's loop starts (the look
// runs a child process and reaps it).
#ifndef MUSTER_AGENT_WORKER_TORCH_H_
#define MUSTER_AGENT_WORKER_TORCH_H_

#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "agent/config/config.h"
#include "agent/workers/torch_names.h"

namespace muster {

// The Python that starts the workers: PYTHON_EXEC (python3) unless --no-python, and then
// the command itself when it is a Python interpreter (`--no-python python3 train.py`, as a
// Pod's command reads); "" when the workers' command is no Python (their torch unknown).
std::string WorkerInterpreter(const Config& config);

// The torch version `python` imports in `worker_env` (the workers' environment, PYTHONPATH
// included: WorkerPlan::env_base); nullopt when there is no such interpreter, no torch, or
// no answer within `timeout`, logged at debug level: the spellings then stay those of every
// version.
std::optional<TorchVersion> FindWorkerTorch(const std::map<std::string, std::string>& worker_env,
                                            const std::string& python, absl::Duration timeout);

}  // namespace muster

#endif  // MUSTER_AGENT_WORKER_TORCH_H_

// How a worker's failure is told (issue 14, "failures visible"): the Failure this node
// reports to the job (torch's error file message, or without one the last lines of the
// worker's stderr), the line the console shows when it happens, and, once the job has
// failed, the root cause's stderr lines on the console, in --termination-log (bounded as
// Kubernetes reads it) and in the agent's own TORCHELASTIC_ERROR_FILE.
// Thread-safe (no state).
#ifndef MUSTER_AGENT_FAILURE_REPORT_H_
#define MUSTER_AGENT_FAILURE_REPORT_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/config/config.h"
#include "launch/stuck_process.h"
#include "launch/worker_launcher.h"
#include "rendezvous/core/types.h"

namespace muster {

// Kubernetes reads at most this much of a container's termination message file.
inline constexpr size_t kTerminationLogBytes = 4096;

// The failure of `exit` (a worker of `node`) as the job records it. Text fields are valid
// UTF-8 (proto3 strings); the stderr lines travel only when there is no error file message.
rdzv::Failure FailureOf(const WorkerExit& exit, const rdzv::NodeInfo& node, bool restartable);

// "rank 1 (local_rank 1, pid 4242, host node-0) failed: exit 1: ValueError: boom"
std::string FailedWorkerLine(const rdzv::Failure& failure);

// The failure of a node whose stop gave up on processes that outlived SIGKILL
// (launch/stuck_process.h): the node leaves the job (kNodeLost, 138); `what` names each
// process with its state and wchan, the first one's pid and ranks are the failure's.
rdzv::Failure StuckFailure(const std::vector<StuckProcess>& stuck, const rdzv::NodeInfo& node);

// The root cause's stderr lines under a heading naming whose they are, each indented;
// "" when it has none.
// `hung`: the tail is a hang's grouping of every rank's stack (rendezvous/core/hang.h).
std::string StderrBlock(int rank, const std::string& host, const std::string& stderr_tail,
                        bool hung = false);
std::string StderrBlock(const rdzv::Failure& failure);

// What --termination-log gets, at most kTerminationLogBytes with its final newline: the
// summary line, then `block` (StderrBlock) with its heading and as many of its last lines
// as fit (the end of a traceback says the most).
std::string TerminationLogText(const std::string& summary, const std::string& block);

// The root cause of a failed job into the agent's own TORCHELASTIC_ERROR_FILE (from
// `agent_env`, the agent's environment: WorkerPlan::env_base), when it has one (torchrun's
// convention: the launcher above reads it). A failure to write is logged.
void WriteRootCauseErrorFile(const std::map<std::string, std::string>& agent_env,
                             const rdzv::Outcome& outcome);

// The agent's exit code for a failed job's outcome (docs/reference/exit-codes.md "Telling the
// scheduler"): `fatal` (--fatal-exit-code) when a worker's failure ended the job for good
// (not restartable, or the budget spent: its kind is kWorker or kHung), else the outcome's
// own code (138 for a rendezvous timeout or lost nodes, 143 for a preemption).
int FailedJobExitCode(const rdzv::Outcome& outcome, std::optional<int> fatal);

}  // namespace muster

#endif  // MUSTER_AGENT_FAILURE_REPORT_H_

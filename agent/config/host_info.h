// HostInfo: the facts about this machine that `muster run`'s flags resolve against, read
// once by Detect and handed to the parser, so that parsing itself never looks at the host
// (tests and the fuzz target give their own). Plain data.
#ifndef MUSTER_AGENT_HOST_INFO_H_
#define MUSTER_AGENT_HOST_INFO_H_

#include <map>
#include <string>

namespace muster {

struct HostInfo {
  int cpus = 1;  // CPUs this process may run on: --nproc-per-node cpu|auto
  int gpus = 0;  // CUDA_VISIBLE_DEVICES entries, else /dev/nvidiaN: --nproc-per-node gpu|auto
  // A GPU driver may be here (DriverMayBePresent): --nproc-per-node gpu with no GPU seen
  // is then left to the GPU probe instead of refused.
  bool driver_may_be_present = false;
  // /dev/termination-log is writable (a Kubernetes container): the default --termination-log.
  bool termination_log_writable = false;
  std::string hostname{};  // empty when unknown

  static HostInfo Detect(const std::map<std::string, std::string>& env);
};

// The CPUs in this process's affinity mask (all online CPUs when that cannot be read).
int CountAffinityCpus();

// The /dev/nvidiaN device nodes: the GPUs a container was given.
int CountNvidiaDevices();

// Whether a GPU driver may be here (/dev/nvidiactl, or MUSTER_LIBCUDA pointing at one), so
// that `--probe auto` does not spend a fork on hosts that obviously have none.
bool DriverMayBePresent(const std::map<std::string, std::string>& env);

}  // namespace muster

#endif  // MUSTER_AGENT_HOST_INFO_H_

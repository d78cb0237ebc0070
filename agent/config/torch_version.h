// TorchVersion: the major and minor version of the torch the workers import, as the
// resolve step finds it (agent/workers/worker_torch.h) and the WorkerPlan carries it. Plain
// data; the spellings that depend on it are agent/workers/torch_names.h's.
#ifndef MUSTER_AGENT_CONFIG_TORCH_VERSION_H_
#define MUSTER_AGENT_CONFIG_TORCH_VERSION_H_

namespace muster {

struct TorchVersion {
  int major = 0;
  int minor = 0;

  bool AtLeast(int want_major, int want_minor) const {
    return major > want_major || (major == want_major && minor >= want_minor);
  }
};

}  // namespace muster

#endif  // MUSTER_AGENT_CONFIG_TORCH_VERSION_H_

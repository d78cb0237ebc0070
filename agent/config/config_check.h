// CheckRunConfig: the part of `muster run`'s configuration that depends on this host's
// filesystem, done after ParseRunFlags (which never touches it) and before anything
// starts. It settles whether a command that starts with a Python interpreter's name is a
// Pod's own command line (`python train.py`: run as given) rather than a script of that
// name, and checks that the TLS files are readable, the training script exists and the
// log directory can be made and written (mkdir -p). Errors are InvalidArgument naming the
// flag, as the parser's; the caller exits 2. Not thread-safe with respect to the
// filesystem it changes (mkdir).
#ifndef MUSTER_AGENT_CONFIG_CHECK_H_
#define MUSTER_AGENT_CONFIG_CHECK_H_

#include "absl/status/status.h"
#include "agent/config/config.h"

namespace muster {

absl::Status CheckRunConfig(Config* config);

}  // namespace muster

#endif  // MUSTER_AGENT_CONFIG_CHECK_H_

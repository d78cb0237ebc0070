// Node-local stacks (issue 17 item 1, docs/guides/hangs-and-stacks.md "Stacks"): every agent
// answers `muster stacks` without --rdzv-endpoint on an abstract Unix socket, "@muster-stacks/<run
// id>/<agent pid>", so that a job with no rendezvous server (one node, --standalone) or one whose
// server cannot relay it (--rdzv-backend etcd) still shows its ranks, node by node. The socket
// lives in the network namespace, not the filesystem: nothing to clean up after a crash.
// Only the agent's own user or root may ask (SO_PEERCRED): an answer signals the workers.
//
// Protocol: the client sends "stacks <timeout ms>\n"; the agent answers with one JSON
// document (LocalStacksJson) and closes.
//
// LocalStacksServer: owned by the agent's parts; runs on the agent's loop thread (Collect
// is called there) and answers from the collector's thread. Not thread-safe otherwise.
#ifndef MUSTER_AGENT_LOCAL_STACKS_H_
#define MUSTER_AGENT_LOCAL_STACKS_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/acceptor.h"
#include "base/event_loop.h"
#include "base/unique_fd.h"
#include "rendezvous/core/stacks.h"

namespace muster {

// "muster-stacks/<run_id>/<pid>" (the abstract name, without its leading NUL).
std::string LocalStacksName(const std::string& run_id, pid_t pid);

class LocalStacksServer {
 public:
  using Reply = std::function<void(std::vector<rdzv::RankStack> ranks)>;
  using Collect = std::function<void(absl::Duration timeout, Reply reply)>;

  // Listens on LocalStacksName(run_id, getpid()); node `host` names this node in answers.
  static absl::StatusOr<std::unique_ptr<LocalStacksServer>> Start(EventLoop* loop,
                                                                  const std::string& run_id,
                                                                  const std::string& host,
                                                                  Collect collect);
  ~LocalStacksServer();  // stops listening; answers in flight still go out

 private:
  LocalStacksServer(EventLoop* loop, std::string host, Collect collect);
  void Accepted(UniqueFd socket);
  void Answer(int fd);

  EventLoop* const loop_;
  const std::string host_;
  const Collect collect_;
  std::vector<int> waiting_;  // accepted, request not read yet (removed from the loop at end)
  std::unique_ptr<Acceptor> acceptor_;  // base/acceptor: rests when out of descriptors
};

// One local agent's socket: its run id and pid.
struct LocalAgent {
  std::string run_id;
  pid_t pid = 0;
};

// The agents listening on this host (this network namespace), from /proc/net/unix.
std::vector<LocalAgent> FindLocalAgents();

// Asks one local agent; its node's stacks, or Unavailable / DeadlineExceeded, or
// PermissionDenied (naming the agent's user) when this process is neither its user nor root.
absl::StatusOr<rdzv::NodeStacks> AskLocalAgent(const LocalAgent& agent, absl::Duration collect);

}  // namespace muster

#endif  // MUSTER_AGENT_LOCAL_STACKS_H_

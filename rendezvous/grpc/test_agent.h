// TestAgent (tests only): one GrpcRendezvousClient with its own EventLoop running on its
// own thread, as in the agent, recording every event and error for the test to wait on.
// Every wait is bounded. Thread-safe: the test thread calls it; sinks run on the loop.
#ifndef MUSTER_RENDEZVOUS_GRPC_TEST_AGENT_H_
#define MUSTER_RENDEZVOUS_GRPC_TEST_AGENT_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "base/event_loop.h"
#include "base/mutex.h"
#include "rendezvous/grpc/client.h"

namespace muster::rdzv {

class TestAgent {
 public:
  explicit TestAgent(GrpcRendezvousClient::Options options);
  ~TestAgent();  // destroys the client (if still there) on the loop thread, then stops

  // Runs `fn` with the client on the loop thread and waits for it.
  void Call(const std::function<void(GrpcRendezvousClient&)>& fn);
  void Start(const NodeInfo& node, const JobSpec& spec);
  // Destroys the client on the loop thread (the stream is cancelled).
  void DestroyClient();

  // The next event of `kind` not returned before; nullopt after `timeout`.
  std::optional<Event> WaitEvent(Event::Kind kind, absl::Duration timeout = absl::Seconds(10));
  std::optional<absl::Status> WaitError(absl::Duration timeout = absl::Seconds(10));
  int errors_seen() const;

 private:
  void OnEvent(const Event& event);
  void OnError(const absl::Status& error);

  std::unique_ptr<EventLoop> loop_;
  std::unique_ptr<GrpcRendezvousClient> client_;  // used on the loop thread only
  std::atomic<bool> stop_{false};
  std::thread thread_;

  mutable Mutex mu_;
  CondVar cv_;
  std::vector<Event> events_ ABSL_GUARDED_BY(mu_);
  // Per kind: the index after the last one returned.
  std::map<Event::Kind, size_t> taken_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Status> errors_ ABSL_GUARDED_BY(mu_);
};

NodeInfo TestNode(const std::string& name, int store_port, int rank_hint = -1,
                  int local_world_size = 1);

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_TEST_AGENT_H_

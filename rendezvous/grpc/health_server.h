// HealthServer: grpc.health.v1 on its own port, for Kubernetes gRPC probes of an agent
// (--health-port). Three answers, each NOT_SERVING until set otherwise:
//   readiness  "" and "muster.v1.Ready": SetReady (the agent decides what ready means);
//   workers    "muster.v1.Workers" and its old name "muster.v1.Agent": SetWorkersRunning;
//   liveness   "muster.v1.Liveness": SERVING as long as the agent runs.
// gRPC types stay behind this header. Thread-safe.
#ifndef MUSTER_RENDEZVOUS_GRPC_HEALTH_SERVER_H_
#define MUSTER_RENDEZVOUS_GRPC_HEALTH_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace muster::rdzv {

class HealthServer {
 public:
  // `listen_address` like "[::]:8081". Unavailable when it cannot be bound.
  static absl::StatusOr<std::unique_ptr<HealthServer>> Start(const std::string& listen_address);
  ~HealthServer();

  int port() const;
  // The overall service ("") and "muster.v1.Ready".
  void SetReady(bool ready);
  // "muster.v1.Workers" and "muster.v1.Agent".
  void SetWorkersRunning(bool running);

 private:
  class Impl;
  explicit HealthServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_HEALTH_SERVER_H_

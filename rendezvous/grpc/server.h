// RendezvousServer: the gRPC rendezvous server (docs/design.md §4.3, §4.6). Serves
// muster.v1.Rendezvous (one Session stream per agent), muster.v1.JobStatus and
// grpc.health.v1 on one port. Embedded in the agent whose address matches the endpoint,
// or run alone by `muster serve`. gRPC types stay behind this header.
//
// Ownership: the caller owns the server; destroying it shuts it down (open streams are
// cancelled, which every agent sees as a lost server). Thread-safe: port() and Shutdown()
// may be called from any thread; the server runs on gRPC's own threads.
#ifndef MUSTER_RENDEZVOUS_GRPC_SERVER_H_
#define MUSTER_RENDEZVOUS_GRPC_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/registry/job_registry.h"

namespace muster::rdzv {

class RendezvousServer {
 public:
  struct Options {
    // host:port; port 0 picks a free one (see port()). "[::]:0", "0.0.0.0:29400", ...
    // Empty: no listening port; connections arrive through AdoptConnection() (the job's
    // shared port, rendezvous/shared_port), which needs TLS off.
    std::string listen_address = "[::]:0";
    // Non-empty: every RPC must carry metadata "authorization: Bearer <token>".
    std::string token;
    // PEM files. cert+key enable TLS; client_ca additionally requires client certificates.
    std::string tls_cert_file;
    std::string tls_key_file;
    std::string tls_client_ca_file;
    // Non-empty: joins with any other run id are refused (InvalidArgument naming both).
    std::string run_id;
    // Liveness under partitions (docs/operations/liveness-and-partitions.md "muster's own
    // rendezvous (gRPC)"): every agent connection gets TCP keepalive, a probe after
    // `heartbeat_interval` of silence and then every interval, and is reset once the agent has been
    // silent for interval x misses; its node is then lost. The hosting agent passes its --rdzv-conf
    // values.
    absl::Duration heartbeat_interval = absl::Seconds(5);
    int heartbeat_misses = 3;
    // A job none of whose agents has been connected for this long (finished or abandoned)
    // is forgotten: `muster serve --job-retention` (JobRegistry).
    absl::Duration job_retention = JobRegistry::kJobRetention;
    // Told of every join and round (the server's metrics, --metrics-port); may be null.
    std::shared_ptr<RegistryObserver> observer;
  };

  // Binds and starts serving. InvalidArgument for bad TLS files; Unavailable when the
  // address cannot be bound.
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(const Options& options);

  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The bound port (the chosen one when listen_address asked for port 0); 0 without one.
  int port() const;
  // Serves a connected socket (`fd`, non-blocking; owned from now on) whose peer is `peer`
  // ("addr:port"), as if the server had accepted it: plaintext HTTP/2 only. Thread-safe;
  // after Shutdown() the socket is closed.
  void AdoptConnection(int fd, const std::string& peer);
  // Cancels every stream and stops serving; idempotent.
  void Shutdown();
  // Blocks until every agent but `except_node_id` has closed its stream, or `timeout`:
  // a hosting agent calls it before exiting, so the others receive the outcome instead of
  // losing the server. Returns whether they all left in time.
  bool WaitForAgentsToLeave(const std::string& except_node_id, absl::Duration timeout);
  // Flight recorder dumps the agents send after a failed round (docs/guides/collective-traces.md)
  // are written under `root` (per_job: one folder per run id below it); `host` names this
  // machine in the locations the agents are told. Without a call none are kept.
  void KeepTracesIn(const std::string& root, bool per_job, const std::string& host);
  // Jobs by phase and nodes by state (the server's metrics); thread-safe.
  RegistryCounts Counts() const;

 private:
  class Impl;
  explicit RendezvousServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_GRPC_SERVER_H_

// The etcd backend's job status (`muster status --rdzv-backend etcd`): the coordinator
// puts the same JobStatus that muster's own server answers under PREFIX/RUN_ID/status
// (with the job's lease, job_lease.h: it outlives the job's agents by up to 3 lease TTLs,
// so a job that just ended shows its outcome), and ReadEtcdJobStatus reads it back. Plain
// functions; thread-safe.
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_STATUS_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_STATUS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "rendezvous/core/job_status.h"
#include "rendezvous/etcd/etcd_security.h"

namespace muster::rdzv::etcd {

struct EtcdStatusQuery {
  std::vector<std::string> endpoints;  // etcd members, "host:port"
  std::string prefix = "/muster";
  std::string run_id;
  absl::Duration timeout = absl::Seconds(10);  // per member
  EtcdSecurity security;  // --rdzv-conf protocol, cacert, cert, key, username, password_file
};

// The job's status; NotFound when etcd has none (no such job, or one whose job lease
// ended); Unavailable when no member answers.
absl::StatusOr<JobStatusSnapshot> ReadEtcdJobStatus(const EtcdStatusQuery& query);

// Serialises `status` as the value of the status key (a v1::JobStatusReply).
std::string EtcdStatusValue(const JobStatusSnapshot& status);

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_STATUS_H_

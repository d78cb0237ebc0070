#include "rendezvous/etcd/etcd_status.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/wire/proto_convert.h"

namespace muster::rdzv::etcd {

std::string EtcdStatusValue(const JobStatusSnapshot& status) {
  v1::JobStatusReply reply;
  wire::ToProto(status, &reply);
  // Flight recorder paths (docs/guides/collective-traces.md): the last round's only, so that the
  // value stays under etcd's request limit.
  if (reply.traces_size() > 1) reply.mutable_traces()->DeleteSubrange(0, reply.traces_size() - 1);
  return reply.SerializeAsString();
}

absl::StatusOr<JobStatusSnapshot> ReadEtcdJobStatus(const EtcdStatusQuery& query) {
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = EtcdClient::Create(
      {.endpoints = query.endpoints, .call_timeout = query.timeout, .security = query.security});
  if (!etcd.ok()) return etcd.status();
  const std::string key = absl::StrCat(query.prefix, "/", query.run_id, "/status");
  absl::StatusOr<RangeResult> got = (*etcd)->Get(key);
  if (!got.ok()) {
    return absl::UnavailableError(absl::StrCat("etcd at ", absl::StrJoin(query.endpoints, ","),
                                               ": ", got.status().message()));
  }
  if (got->kvs.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "etcd has no key ", key,
        ": no such job (a job's status expires 3 lease TTLs after its last agent ended; "
        "check --rdzv-id and --rdzv-conf etcd_prefix=)"));
  }
  v1::JobStatusReply reply;
  if (!reply.ParseFromString(got->kvs[0].value)) {
    return absl::DataLossError(absl::StrCat("etcd key ", key, " is not a job status"));
  }
  return wire::FromProto(reply);
}

}  // namespace muster::rdzv::etcd

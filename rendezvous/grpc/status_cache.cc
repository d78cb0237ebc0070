#include "rendezvous/grpc/status_cache.h"

#include "base/status_macros.h"
#include "muster/v1/rendezvous.pb.h"
#include "rendezvous/wire/proto_convert.h"

namespace muster::rdzv::grpc_internal {

using wire::ToProto;

absl::StatusOr<grpc::Slice> StatusCache::Reply(const std::string& run_id, absl::Time now) {
  MutexLock lock(&mu_);
  absl::StatusOr<uint64_t> version_or = registry_->StatusVersion(run_id);
  if (!version_or.ok()) {
    entries_.erase(run_id);  // the job is gone: so is its reply
    return version_or.status();
  }
  uint64_t version = *version_or;
  auto it = entries_.find(run_id);
  if (it != entries_.end() && it->second.version == version && now - it->second.built < max_age_) {
    return it->second.bytes;
  }
  Entry entry;
  ASSIGN_OR_RETURN(JobStatusSnapshot status, registry_->Status(run_id, &entry.version));
  v1::JobStatusReply reply;
  ToProto(status, &reply);
  entry.built = now;
  entry.bytes = grpc::Slice(reply.SerializeAsString());
  ++builds_;
  grpc::Slice out = entry.bytes;
  entries_[run_id] = std::move(entry);
  return out;
}

int64_t StatusCache::builds() const {
  MutexLock lock(&mu_);
  return builds_;
}

}  // namespace muster::rdzv::grpc_internal

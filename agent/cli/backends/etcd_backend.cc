// --rdzv-backend etcd (rendezvous/etcd/, docs/guides/etcd.md): no agent serves the
// rendezvous, each serves its own store; the query commands read the status the job's
// coordinator keeps in etcd and put their requests there for it (etcd_requests.h).
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/cli/backends/rendezvous_backend.h"
#include "agent/cli/job_query.h"
#include "agent/config/etcd_security_flags.h"
#include "agent/config/flag_parsers.h"
#include "agent/config/rendezvous_flags.h"
#include "base/endpoint.h"
#include "base/status_macros.h"
#include "rendezvous/etcd/etcd_rendezvous.h"
#include "rendezvous/etcd/etcd_requests.h"
#include "rendezvous/etcd/etcd_status.h"

namespace muster {
namespace {

// --rdzv-conf for a command that reads a job from etcd: the agents' etcd_prefix and the
// same TLS and user keys as `muster run` (etcd_security_flags.h), checked the same way.
absl::StatusOr<rdzv::etcd::EtcdSecurity> ApplyEtcdConf(
    const FlagValue& conf, const std::map<std::string, std::string>& env, std::string* prefix) {
  Config c;
  c.rdzv_backend = rdzv::Backend::kEtcd;
  for (absl::string_view item : absl::StrSplit(conf.text, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.first == "etcd_prefix" && absl::StartsWith(kv.second, "/")) {
      *prefix = std::string(absl::StripSuffix(kv.second, "/"));
      continue;
    }
    std::optional<absl::Status> applied = ApplyEtcdSecurityKey(conf.where, kv.first, kv.second, &c);
    if (!applied) {
      return FlagError(conf.where, absl::StrCat("'", item,
                                                "': takes only etcd_prefix=/path (the agents' "
                                                "prefix) and etcd's protocol, cacert, cert, key, "
                                                "username, password_file (as the agents have)"));
    }
    RETURN_IF_ERROR(*applied);
  }
  RETURN_IF_ERROR(FinishEtcdSecurity(env, &c));
  return EtcdSecurityOf(c.etcd_access);
}

// The query from a command's flags (--rdzv-endpoint lists etcd's members, --rdzv-id names
// the job, --rdzv-conf etcd_prefix=/path, --timeout bounds each member's answer).
absl::StatusOr<rdzv::etcd::EtcdStatusQuery> EtcdStatusQueryFromFlags(const FlagValues& values) {
  rdzv::etcd::EtcdStatusQuery query;
  std::optional<FlagValue> endpoint = values.Get("rdzv-endpoint");
  if (!endpoint) {
    return FlagError("--rdzv-endpoint", "missing; give HOST:2379[,HOST:2379...] (etcd's members)");
  }
  for (absl::string_view item : absl::StrSplit(endpoint->text, ',')) {
    ASSIGN_OR_RETURN(Endpoint e, ParseEndpoint(endpoint->where, std::string(item), 2379));
    query.endpoints.push_back(JoinHostPort(e.host, e.port));
  }
  std::optional<FlagValue> id = values.Get("rdzv-id");
  if (!id) {
    return FlagError("--rdzv-id",
                     "missing; with --rdzv-backend etcd, name the job (etcd keeps no list of "
                     "jobs; `etcdctl get --prefix --keys-only /muster/` shows their keys)");
  }
  ASSIGN_OR_RETURN(query.run_id, ParseRunId(*id));
  if (std::optional<FlagValue> conf = values.Get("rdzv-conf")) {
    ASSIGN_OR_RETURN(query.security, ApplyEtcdConf(*conf, values.env(), &query.prefix));
  }
  if (std::optional<FlagValue> t = values.Get("timeout")) {
    ASSIGN_OR_RETURN(query.timeout, PositiveDuration(*t));
  }
  if (values.Get("watch")) {
    return FlagError("--watch", "not with --rdzv-backend etcd yet; run `muster status` again");
  }
  return query;
}

class EtcdJobQuery : public JobQuery {
 public:
  explicit EtcdJobQuery(rdzv::etcd::EtcdStatusQuery query) : query_(std::move(query)) {}
  const std::string& run_id() const override { return query_.run_id; }
  std::string Where() const override {
    return absl::StrCat("etcd ", absl::StrJoin(query_.endpoints, ","));
  }
  // The words these lines have always had: the status is read "from etcd", the stacks
  // come "through etcd H1:2379,...".
  std::string From(QueryCommand command) const override {
    switch (command) {
      case QueryCommand::kStatus:
        return "from etcd";
      case QueryCommand::kStacks:
        return "through " + Where();
      case QueryCommand::kDrain:
        break;
    }
    return JobQuery::From(command);
  }

  // Etcd keeps no list of jobs: the query needs --rdzv-id (EtcdStatusQueryFromFlags).
  absl::StatusOr<std::vector<rdzv::JobSummary>> ListJobs() override {
    return absl::InvalidArgumentError("--rdzv-id: etcd keeps no list of jobs; name the job");
  }
  absl::StatusOr<rdzv::JobStatusSnapshot> Status() override {
    return rdzv::etcd::ReadEtcdJobStatus(query_);
  }
  // Refused with the flags (EtcdStatusQueryFromFlags).
  absl::Status Watch(
      const std::function<void(const rdzv::JobStatusSnapshot&)>& /*on_change*/) override {
    return absl::InvalidArgumentError(
        "--watch: not with --rdzv-backend etcd yet; run `muster status` again");
  }
  absl::StatusOr<std::vector<rdzv::NodeStacks>> Stacks(absl::Duration collect) override {
    return rdzv::etcd::StacksThroughEtcd(query_, collect);
  }
  absl::StatusOr<rdzv::NodeInfo> Drain(const std::string& node_id, const std::string& host,
                                       const std::string& reason) override {
    return rdzv::etcd::DrainThroughEtcd(query_, node_id, host, reason);
  }

 private:
  const rdzv::etcd::EtcdStatusQuery query_;
};

class EtcdRendezvousBackend : public RendezvousBackend {
 public:
  // Without --local-addr / POD_IP the node's address is the store's: the local address of
  // the route toward the first etcd member (ListenAddressFor), as with gRPC's rendezvous.
  absl::Status Wire(const RunWiring& run, AgentParts& parts) const override {
    const Config& config = run.plan.config;
    std::vector<std::string> targets;  // gRPC's words for the members
    for (const Endpoint& member : run.plan.rendezvous.etcd_members) {
      targets.push_back(member.ToString());
    }
    ASSIGN_OR_RETURN(parts.rendezvous, rdzv::etcd::EtcdRendezvousClient::Create({
                                           .endpoints = std::move(targets),
                                           .prefix = config.etcd_prefix,
                                           .loop = parts.loop.get(),
                                           .join_timeout = config.join_timeout,
                                           .security = EtcdSecurityOf(config.etcd_access),
                                           .on_stacks_request = run.on_stacks_request,
                                       }));
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<JobQuery>> Query(const FlagValues& values) const override {
    ASSIGN_OR_RETURN(rdzv::etcd::EtcdStatusQuery query, EtcdStatusQueryFromFlags(values));
    return std::make_unique<EtcdJobQuery>(std::move(query));
  }
};

}  // namespace

const RendezvousBackend& EtcdBackend() {
  static const EtcdRendezvousBackend* const backend = new EtcdRendezvousBackend();
  return *backend;
}

}  // namespace muster

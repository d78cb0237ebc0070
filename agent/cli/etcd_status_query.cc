#include "agent/cli/etcd_status_query.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/cli/job_query.h"
#include "agent/config/etcd_security_flags.h"
#include "agent/config/flag_parsers.h"
#include "agent/config/rendezvous_flags.h"
#include "base/endpoint.h"
#include "base/status_macros.h"

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

}  // namespace

absl::StatusOr<bool> StatusFromEtcd(const FlagValues& values) {
  std::optional<FlagValue> backend = values.Get("rdzv-backend");
  if (!backend || backend->text == "static" || backend->text == "c10d") return false;
  if (backend->text == "etcd" || backend->text == "etcd-v2") return true;
  return FlagError(backend->where, absl::StrCat("'", backend->text,
                                                "' must be c10d, static (muster's own "
                                                "rendezvous), etcd or etcd-v2"));
}

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

}  // namespace muster

#include "agent/cli/job_query.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "agent/config/rendezvous_flags.h"
#include "base/duration.h"
#include "base/endpoint.h"
#include "base/status_macros.h"

namespace muster {

absl::StatusOr<absl::Duration> PositiveDuration(const FlagValue& value) {
  // A wait without a deadline is no answer either.
  absl::StatusOr<absl::Duration> d = ParseDuration(value.text);
  if (!d.ok() || *d <= absl::ZeroDuration() || *d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        value.where, ": '", value.text, "' is not a positive duration (e.g. 10, 10s, 500ms)"));
  }
  return *d;
}

absl::StatusOr<rdzv::JobStatusQuery> JobQueryFromFlags(const FlagValues& values) {
  rdzv::JobStatusQuery query;
  std::optional<FlagValue> endpoint = values.Get("rdzv-endpoint");
  if (!endpoint) {
    return absl::InvalidArgumentError(
        "--rdzv-endpoint: missing; give HOST[:PORT] of the rendezvous");
  }
  ASSIGN_OR_RETURN(Endpoint parsed,
                   ParseEndpoint(endpoint->where, endpoint->text, kDefaultRendezvousPort));
  query.endpoint = parsed.ToString();
  if (auto id = values.Get("rdzv-id")) {
    ASSIGN_OR_RETURN(query.run_id, ParseRunId(*id));
  }
  ASSIGN_OR_RETURN(query.token, ResolveToken(values.Get("token-file"), values.env()));
  if (auto ca = values.Get("tls-ca")) query.tls_ca_file = ca->text;
  if (auto t = values.Get("timeout")) {
    ASSIGN_OR_RETURN(query.timeout, PositiveDuration(*t));
    query.wait_for_server = true;  // without --timeout, a refused connection fails at once
  }
  return query;
}

}  // namespace muster

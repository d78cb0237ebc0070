// The apply steps of `muster run`'s flags (FlagSpec::apply in run_flags.cc's table), other
// than the rendezvous flags' (rendezvous_flags.h): each sets one flag's value into Config,
// or returns InvalidArgument naming where the value came from and what it should be.
// Thread-safe (pure functions).
#ifndef MUSTER_AGENT_RUN_FLAG_STEPS_H_
#define MUSTER_AGENT_RUN_FLAG_STEPS_H_

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "agent/config/config.h"
#include "agent/config/flag_parsers.h"
#include "agent/config/flag_table.h"
#include "base/status_macros.h"

namespace muster {

// Apply steps many flags share: the value as it is, a non-empty value, a switch, a mode,
// a stream selection, the value parsed by kParse (whose error message follows `where`).
template <std::string Config::*kField>
absl::Status SetText(const FlagValue& v, Config* c) {
  c->*kField = v.text;
  return absl::OkStatus();
}
template <std::string Config::*kField>
absl::Status SetNonEmpty(const FlagValue& v, Config* c) {
  if (v.text.empty()) return FlagError(v.where, "must not be empty");
  c->*kField = v.text;
  return absl::OkStatus();
}
template <bool Config::*kField>
absl::Status SetSwitch(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->*kField, ParseSwitch(v));
  return absl::OkStatus();
}
template <typename Mode, Mode Config::*kField>
absl::Status SetMode(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->*kField, ParseModeFlag<Mode>(v));
  return absl::OkStatus();
}
template <StreamSelection Config::*kField>
absl::Status SetStreams(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->*kField, ParseStreams(v.where, v.text));
  return absl::OkStatus();
}
template <auto kField, auto kParse>
absl::Status SetParsed(const FlagValue& v, Config* c) {
  auto parsed = kParse(v.text);
  if (!parsed.ok()) return FlagError(v.where, parsed.status().message());
  c->*kField = *std::move(parsed);
  return absl::OkStatus();
}
// For flags torchrun has and muster does not use: the value is checked, then dropped.
template <auto kParse>
absl::Status CheckParses(const FlagValue& v, Config*) {
  auto parsed = kParse(v.text);
  if (!parsed.ok()) return FlagError(v.where, parsed.status().message());
  return absl::OkStatus();
}

// --nnodes N or MIN:MAX.
absl::Status ApplyNnodes(const FlagValue& value, Config* config);
// --master-addr: a host name or address.
absl::Status ApplyMasterAddr(const FlagValue& value, Config* config);
// --master-port: 0..65535 (0: any free port, as torchrun; see FinishAnyFreePort).
absl::Status ApplyMasterPort(const FlagValue& value, Config* config);
// --rdzv-backend: static or c10d, accepted and otherwise unused (both meet at muster's own
// rendezvous); etcd and etcd-v2 (an alias: v3 API) choose the etcd backend.
absl::Status CheckRdzvBackend(const FlagValue& value, Config* config);
// --bind-core-list: a CPU list; implies --bind-cores-to-rank.
absl::Status ApplyBindCoreList(const FlagValue& value, Config* config);
// --preload MODULES: comma-separated dotted module names (empty: none).
absl::Status ApplyPreload(const FlagValue& value, Config* config);
// --max-restarts: >= 0.
absl::Status ApplyMaxRestarts(const FlagValue& value, Config* config);
absl::Status ApplySpares(const FlagValue& value, Config* config);
// --restart-policy: Never, OnFailure, Always or ExitCode.
absl::Status ApplyRestartPolicy(const FlagValue& value, Config* config);
absl::Status ApplyContainment(const FlagValue& value, Config* config);
// --local-ranks-filter: comma-separated local ranks.
absl::Status ApplyLocalRanksFilter(const FlagValue& value, Config* config);
// --log-level: see ParseLogLevel.
absl::Status ApplyLogLevel(const FlagValue& value, Config* config);
// --health-port: 0..65535.
absl::Status ApplyHealthPort(const FlagValue& value, Config* config);
// --metrics-port: 0..65535.
absl::Status ApplyMetricsPort(const FlagValue& value, Config* config);
absl::Status ApplyDebugPort(const FlagValue& value, Config* config);
// --probe-timeout: a positive duration.
absl::Status ApplyProbeTimeout(const FlagValue& value, Config* config);
absl::Status ApplyHealthCheckTimeout(const FlagValue& value, Config* config);
absl::Status ApplyQuarantineAfter(const FlagValue& value, Config* config);
// --spare-check-interval: 0 (off) or a duration.
absl::Status ApplySpareCheckInterval(const FlagValue& value, Config* config);
// A size (ParseByteSize), or 0: the health gate checks no free space.
absl::Status ApplyHealthMinFreeSpace(const FlagValue& value, Config* config);

}  // namespace muster

#endif  // MUSTER_AGENT_RUN_FLAG_STEPS_H_

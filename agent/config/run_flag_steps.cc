#include "agent/config/run_flag_steps.h"

#include <cstdio>
#include <optional>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/duration.h"
#include "base/wire_values.h"
#include "launch/cpu_topology.h"
#include "launch/restart_policy.h"

namespace muster {

absl::Status ApplyNnodes(const FlagValue& v, Config* c) {
  std::vector<std::string> parts = absl::StrSplit(v.text, ':');
  int lo = 0, hi = 0;
  bool ok = parts.size() <= 2 && absl::SimpleAtoi(parts[0], &lo) &&
            absl::SimpleAtoi(parts.back(), &hi) && lo >= 1 && hi >= 1;
  if (!ok) {
    return FlagError(v.where, absl::StrCat("'", v.text, "' must be N or MIN:MAX with N >= 1"));
  }
  if (lo > hi) {
    return FlagError(v.where,
                     absl::StrCat("'", v.text, "': MIN ", lo, " is greater than MAX ", hi));
  }
  c->min_nodes = lo;
  c->max_nodes = hi;
  return absl::OkStatus();
}

absl::Status ApplyMasterAddr(const FlagValue& v, Config* c) {
  RETURN_IF_ERROR(CheckHostOrAddress(v.where, v.text));
  c->master_addr = v.text;
  return absl::OkStatus();
}

absl::Status ApplyMasterPort(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(int port, ParseNonNegative(v.where, v.text));
  if (port > 65535) {
    return FlagError(v.where, absl::StrCat("'", v.text, "' is not a port (0..65535)"));
  }
  c->master_port = port;  // 0: any free port, one node only (FinishAnyFreePort)
  c->master_port_given = true;
  return absl::OkStatus();
}

absl::Status CheckRdzvBackend(const FlagValue& v, Config* c) {
  std::optional<rdzv::Backend> backend = rdzv::ParseBackendFlag(v.text);
  if (!backend) {
    return FlagError(v.where, absl::StrCat("'", EscapeForMessage(v.text),
                                           "' is not a torchrun backend (static, c10d, etcd, "
                                           "etcd-v2)"));
  }
  c->rdzv_backend = *backend;
  if (v.text == "etcd-v2") {
    // torch's etcd-v2 speaks etcd's v2 API, which etcd 3.4+ disables by default.
    fprintf(stderr, "muster: --rdzv-backend etcd-v2 uses etcd's v3 API, as etcd\n");
  }
  return absl::OkStatus();
}

absl::Status ApplyBindCoreList(const FlagValue& v, Config* c) {
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(v.text);
  if (!cpus.ok()) return FlagError(v.where, cpus.status().message());
  c->bind_core_list = *cpus;
  c->bind_cores_to_rank = true;
  return absl::OkStatus();
}

absl::Status ApplyPreload(const FlagValue& v, Config* c) {
  std::vector<std::string> modules;
  for (absl::string_view part : absl::StrSplit(v.text, ',', absl::SkipWhitespace())) {
    std::string name(absl::StripAsciiWhitespace(part));
    bool valid = !name.empty() && name.front() != '.' && name.back() != '.';
    for (char ch : name) valid = valid && (absl::ascii_isalnum(ch) || ch == '_' || ch == '.');
    if (!valid) {
      return FlagError(v.where, absl::StrCat("'", name, "' is not a Python module name"));
    }
    modules.push_back(std::move(name));
  }
  c->preload = std::move(modules);
  return absl::OkStatus();
}

absl::Status ApplyMaxRestarts(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->max_restarts, ParseNonNegative(v.where, v.text));
  return absl::OkStatus();
}

absl::Status ApplySpares(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->spares, ParseNonNegative(v.where, v.text));
  return absl::OkStatus();
}

absl::Status ApplyRestartPolicy(const FlagValue& v, Config* c) {
  absl::StatusOr<RestartPolicy> p = ParseRestartPolicy(v.text);
  if (!p.ok()) {
    return FlagError(v.where, absl::StrCat("'", v.text,
                                           "' is not a policy; use Never, OnFailure, Always or "
                                           "ExitCode"));
  }
  c->restart_policy = *p;
  return absl::OkStatus();
}

absl::Status ApplyContainment(const FlagValue& v, Config* c) {
  std::optional<Containment> mode = ParseContainment(v.text);
  if (!mode) {
    return FlagError(v.where,
                     absl::StrCat("'", v.text, "' is not a mode; use auto, cgroup or session"));
  }
  c->containment = *mode;
  return absl::OkStatus();
}

// As torchrun: no empty entry.
absl::Status ApplyLocalRanksFilter(const FlagValue& v, Config* c) {
  c->local_ranks_filter.clear();
  if (v.text.empty()) return absl::OkStatus();  // torchrun's default "": every local rank
  for (absl::string_view part : absl::StrSplit(v.text, ',')) {
    ASSIGN_OR_RETURN(int r, ParseNonNegative(v.where, part));
    c->local_ranks_filter.insert(r);
  }
  return absl::OkStatus();
}

absl::Status ApplyLogLevel(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->log_level, ParseLogLevel(v.where, v.text));
  return absl::OkStatus();
}

namespace {

// A port for one of the agent's own listeners: 0..65535 (0: any free one).
absl::StatusOr<int> ParseListenerPort(const FlagValue& v) {
  ASSIGN_OR_RETURN(int port, ParseNonNegative(v.where, v.text));
  if (port > 65535) return FlagError(v.where, absl::StrCat("'", v.text, "' is not a port"));
  return port;
}

}  // namespace

absl::Status ApplyHealthPort(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->health_port, ParseListenerPort(v));
  return absl::OkStatus();
}

absl::Status ApplyMetricsPort(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->metrics_port, ParseListenerPort(v));
  return absl::OkStatus();
}

absl::Status ApplyDebugPort(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->debug_port, ParseNonNegative(v.where, v.text));
  if (c->debug_port < 1 || c->debug_port > 65535) {
    return FlagError(v.where, absl::StrCat("'", v.text, "' is not a port (1..65535)"));
  }
  return absl::OkStatus();
}

absl::Status ApplyProbeTimeout(const FlagValue& v, Config* c) {
  absl::StatusOr<absl::Duration> d = ParseDuration(v.text);
  if (!d.ok() || *d <= absl::ZeroDuration()) {
    return FlagError(v.where, "must be a positive duration");
  }
  c->probe_timeout = *d;
  return absl::OkStatus();
}

absl::Status ApplyHealthCheckTimeout(const FlagValue& v, Config* c) {
  absl::StatusOr<absl::Duration> d = ParseDuration(v.text);
  if (!d.ok() || *d <= absl::ZeroDuration()) {
    return FlagError(v.where, "must be a positive duration");
  }
  c->health_check_timeout = *d;
  return absl::OkStatus();
}

absl::Status ApplySpareCheckInterval(const FlagValue& v, Config* c) {
  absl::StatusOr<absl::Duration> d = ParseDuration(v.text);
  if (!d.ok() || *d < absl::ZeroDuration()) {
    return FlagError(v.where, "must be 0 (off) or a duration");
  }
  c->spare_check_interval = *d;
  return absl::OkStatus();
}

absl::Status ApplyQuarantineAfter(const FlagValue& v, Config* c) {
  ASSIGN_OR_RETURN(c->quarantine_after, ParseNonNegative(v.where, v.text));
  return absl::OkStatus();
}

absl::Status ApplyHealthMinFreeSpace(const FlagValue& v, Config* c) {
  if (v.text == "0") {
    c->health_min_free_bytes = 0;
    return absl::OkStatus();
  }
  absl::StatusOr<uint64_t> bytes = ParseByteSize(v.text);
  if (!bytes.ok()) return FlagError(v.where, absl::StrCat(bytes.status().message(), ", or 0"));
  c->health_min_free_bytes = *bytes;
  return absl::OkStatus();
}

}  // namespace muster

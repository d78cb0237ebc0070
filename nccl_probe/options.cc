#include "nccl_probe/options.h"

#include <algorithm>
#include <iterator>
#include <string_view>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/duration.h"
#include "base/status_macros.h"
#include "nccl_probe/bandwidth.h"

namespace muster::probe {
namespace {

absl::Status Bad(std::string_view flag, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", std::string(flag), ": ", std::string(why)));
}

absl::StatusOr<int> ParseCount(std::string_view flag, const std::string& v) {
  int n = 0;
  if (!absl::SimpleAtoi(v, &n) || n < 0) return Bad(flag, "want a count >= 0");
  return n;
}

// Applies one `--name value`. `name` is normalised (underscores -> dashes).
absl::Status ApplyFlag(const std::string& name, const std::string& v, ProbeOptions* o) {
  if (name == "libcuda") {
    o->libcuda = v;
    return absl::OkStatus();
  }
  if (name == "libnvml") {
    o->libnvml = v;
    return absl::OkStatus();
  }
  if (name == "libnccl") {
    o->libnccl = v;
    return absl::OkStatus();
  }
  if (name == "timeout") {
    absl::StatusOr<absl::Duration> d = ParseDuration(v);
    if (!d.ok() || *d <= absl::ZeroDuration()) return Bad(name, "want a duration like 30s");
    o->timeout = *d;
    return absl::OkStatus();
  }
  if (name == "min-bytes" || name == "max-bytes" || name == "check-from") {
    absl::StatusOr<uint64_t> b = ParseByteSize(v);
    if (!b.ok()) return Bad(name, std::string(b.status().message()));
    if (name == "min-bytes") o->min_bytes = *b;
    if (name == "max-bytes") o->max_bytes = *b;
    if (name == "check-from") o->check_from_bytes = *b;
    return absl::OkStatus();
  }
  if (name == "step-factor") {
    if (!absl::SimpleAtoi(v, &o->step_factor) || o->step_factor < 2)
      return Bad(name, "want an integer >= 2");
    return absl::OkStatus();
  }
  if (name == "warmup-iters") {
    ASSIGN_OR_RETURN(o->warmup_iters, ParseCount(name, v));
    return absl::OkStatus();
  }
  if (name == "iters") {
    ASSIGN_OR_RETURN(o->iters, ParseCount(name, v));
    if (o->iters == 0) return Bad(name, "want at least 1 iteration");
    return absl::OkStatus();
  }
  if (name == "min-busbw") {
    double gbps = 0;
    if (!absl::SimpleAtod(v, &gbps) || gbps < 0) return Bad(name, "want GB/s >= 0");
    o->min_busbw_gbps = gbps;
    return absl::OkStatus();
  }
  if (name == "min-nccl-version") {
    absl::StatusOr<NcclVersion> nv = NcclVersion::Parse(v);
    if (!nv.ok()) return Bad(name, std::string(nv.status().message()));
    o->min_nccl_version = *nv;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
}

}  // namespace

absl::StatusOr<ProbeOptions> ParseProbeArgs(const std::vector<std::string>& args,
                                            const EnvLookup& env) {
  ProbeOptions o;
  o.min_nccl_version = *NcclVersion::Parse(kDefaultMinNcclVersion);
  if (const char* v = env("MUSTER_LIBCUDA"); v && *v) o.libcuda = v;
  if (const char* v = env("MUSTER_LIBNVML"); v && *v) o.libnvml = v;
  if (const char* v = env("MUSTER_LIBNCCL"); v && *v) o.libnccl = v;
  bool have_command = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.rfind("--", 0) != 0) {
      if (have_command)
        return absl::InvalidArgumentError(absl::StrCat("unexpected argument \"", arg, "\""));
      if (arg == "inventory")
        o.command = Command::kInventory;
      else if (arg == "nccl")
        o.command = Command::kNccl;
      else
        return absl::InvalidArgumentError(
            absl::StrCat("unknown command \"", arg, "\" (want inventory or nccl)"));
      have_command = true;
      continue;
    }
    std::string name = absl::StrReplaceAll(arg.substr(2), {{"_", "-"}});
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    if (name == "json" || name == "help" || name == "allow-busy" || name == "version") {
      if (value) return Bad(name, "takes no value");
      if (name == "json") o.json = true;
      if (name == "help") o.help = true;
      if (name == "version") o.version = true;
      if (name == "allow-busy") o.allow_busy = true;
      continue;
    }
    static constexpr std::string_view kValueFlags[] = {
        "libcuda",    "libnvml",     "libnccl", "timeout",      "min-bytes", "max-bytes",
        "check-from", "step-factor", "iters",   "warmup-iters", "min-busbw", "min-nccl-version"};
    if (std::find(std::begin(kValueFlags), std::end(kValueFlags), name) == std::end(kValueFlags)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (see --help)"));
    }
    if (!value) {
      if (i + 1 >= args.size()) return Bad(name, "missing value");
      value = args[++i];
    }
    RETURN_IF_ERROR(ApplyFlag(name, *value, &o));
  }
  if (o.min_bytes == 0 || o.min_bytes > o.max_bytes) {
    return absl::InvalidArgumentError("--min-bytes must be > 0 and <= --max-bytes");
  }
  return o;
}

std::string ProbeUsage() {
  return R"(usage: muster-probe [inventory|nccl] [flags]

  inventory            GPUs, memory, ECC, processes holding GPUs (default)
  nccl                 inventory + NCCL version + single-process all-reduce sweep

  --json               print the JSON report (schema: nccl_probe/README.md)
  --timeout D          kill the probe after D (default 30s); exit 7
  --libcuda PATH       default $MUSTER_LIBCUDA or libcuda.so.1
  --libnvml PATH       default $MUSTER_LIBNVML or libnvidia-ml.so.1
  --libnccl PATH       default $MUSTER_LIBNCCL or libnccl.so.2
  --allow-busy         a GPU used by a live process is not a failure
  --min-bytes N        smallest all-reduce (default 8)
  --max-bytes N        largest all-reduce (default 1G)
  --step-factor F      size multiplier (default 2)
  --warmup-iters N     untimed iterations per size (default 5)
  --iters N            timed iterations per size (default 20)
  --min-busbw GBPS     fail (exit 5) when busbw is below GBPS ...
  --check-from N       ... at any size >= N (default: the largest size)
  --min-nccl-version V fail (exit 6) on older NCCL (default 2.17.1)
  --version            print muster-probe's version (muster's) and exit

exit: 0 healthy, 1 probe error, 2 usage, 3 no NVIDIA driver, 4 unhealthy GPU,
      5 busbw below threshold, 6 NCCL missing or too old, 7 timed out
)";
}

}  // namespace muster::probe

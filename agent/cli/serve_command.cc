// `muster serve`: the rendezvous server on its own, for elastic jobs whose server must
// outlive every worker pod. Serves until SIGTERM/SIGINT, then exits 0.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/cli/subcommands.h"
#include "agent/config/rendezvous_flags.h"
#include "agent/config/subcommand.h"
#include "base/duration.h"
#include "base/endpoint.h"
#include "base/errno_status.h"
#include "base/exit_codes.h"
#include "base/logging.h"
#include "base/status_macros.h"
#include "base/wire_values.h"
#include "metrics/metrics_server.h"
#include "metrics/server_metrics.h"
#include "rendezvous/grpc/server.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

constexpr FlagSpec kServeFlags[] = {
    {.name = "host", .group = "Serve", .default_text = "[::]", .help = "address to listen on"},
    {.name = "port",
     .group = "Serve",
     .default_text = "29400",
     .help = "port to listen on (0: any free port, printed)"},
    {.name = "rdzv-id", .group = "Serve", .default_text = "any", .help = "serve only this run id"},
    {.name = "heartbeat-interval",
     .group = "Serve",
     .default_text = "5s",
     .help = "TCP keepalive probe after this much silence on an agent's connection"},
    {.name = "heartbeat-misses",
     .group = "Serve",
     .default_text = "3",
     .help = "an agent silent for interval x misses is lost (its connection is reset)"},
    {.name = "job-retention",
     .group = "Serve",
     .default_text = "10m",
     .help = "forget a job (finished or abandoned) once none of its agents has been "
             "connected for this long"},
    {.name = "metrics-port",
     .group = "Serve",
     .default_text = "none",
     .help = "Prometheus metrics here (HTTP /metrics, on --host's address)"},
    {.name = "log-dir",
     .group = "Serve",
     .default_text = "none",
     .help = "keep the agents' flight recorder dumps of failed rounds in DIR/traces/RUN_ID/"},
    {.name = "token-file",
     .group = "Security",
     .default_text = "MUSTER_TOKEN",
     .help = "file with the shared secret"},
    {.name = "tls-cert", .group = "Security", .default_text = "none", .help = "PEM certificate"},
    {.name = "tls-key", .group = "Security", .default_text = "none", .help = "PEM key"},
    {.name = "log-level", .group = "Output", .default_text = "info", .help = "log level"},
};

constexpr Subcommand kServe = {
    .name = "serve",
    .usage = "Usage: muster serve [flags]\n\nServes the rendezvous of muster jobs.\n",
    .flags = kServeFlags,
};

// The server's options from its flags (`host` is --host's), or a usage error's message.
absl::StatusOr<rdzv::RendezvousServer::Options> ServeOptions(const FlagValues& values,
                                                             const std::string& host) {
  if (!values.rest().empty()) {
    return absl::InvalidArgumentError("takes no arguments, got '" + values.rest()[0] + "'");
  }
  rdzv::RendezvousServer::Options options;
  // The address is given to gRPC as written ("[::]", a name, an IPv6 address unbracketed);
  // the port too: gRPC refuses what it cannot bind.
  options.listen_address = JoinHostPort(host, values.TextOr("port", "29400"));
  if (auto id = values.Get("rdzv-id")) {
    ASSIGN_OR_RETURN(options.run_id, ParseRunId(*id));
  }
  if (auto v = values.Get("heartbeat-interval")) {
    absl::StatusOr<absl::Duration> d = ParseDuration(v->text);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--heartbeat-interval needs a positive duration (5s, 500ms), got '" + v->text + "'");
    }
    options.heartbeat_interval = *d;
  }
  if (auto v = values.Get("job-retention")) {
    absl::StatusOr<absl::Duration> d = ParseDuration(v->text);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--job-retention needs a positive duration (10m, 30s), got '" + v->text + "'");
    }
    options.job_retention = *d;
  }
  if (auto v = values.Get("heartbeat-misses")) {
    if (!absl::SimpleAtoi(v->text, &options.heartbeat_misses) || options.heartbeat_misses < 1) {
      return absl::InvalidArgumentError("--heartbeat-misses needs a whole number >= 1, got '" +
                                        v->text + "'");
    }
  }
  if (auto v = values.Get("metrics-port")) {
    int port = -1;
    if (!absl::SimpleAtoi(v->text, &port) || port < 0 || port > 65535) {
      return absl::InvalidArgumentError("--metrics-port needs a port (0..65535), got '" + v->text +
                                        "'");
    }
  }
  ASSIGN_OR_RETURN(options.token, ResolveToken(values.Get("token-file"), values.env()));
  if (auto c = values.Get("tls-cert")) options.tls_cert_file = c->text;
  if (auto k = values.Get("tls-key")) options.tls_key_file = k->text;
  return options;
}

// --log-dir: the agents' flight recorder dumps go to DIR/traces/<run id>/
// (docs/guides/collective-traces.md); DIR must exist or be creatable now, not at the first failure.
absl::Status KeepTraces(const std::string& dir, rdzv::RendezvousServer* server) {
  const std::string root = dir + "/traces";
  for (const std::string& d : {dir, root}) {
    // EEXIST: kept from an earlier run, which is fine; anything else is the user's to fix.
    if (mkdir(d.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InvalidArgumentError(absl::StrCat("--log-dir ", dir, ": cannot create ", d, ": ",
                                                     std::strerror(errno),
                                                     "; give a writable directory"));
    }
  }
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) return ErrnoStatus("gethostname", errno);
  server->KeepTracesIn(root, /*per_job=*/true, WireHostname(host));
  spdlog::info("flight recorder traces of failed rounds go to {}/RUN_ID/", root);
  return absl::OkStatus();
}

}  // namespace

const Subcommand& ServeSubcommand() { return kServe; }

int ServeCommand(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env) {
  int code = exit_code::kSuccess;
  std::optional<FlagValues> values = StartSubcommand(kServe, args, env, &code);
  if (!values) return code;
  std::string host = values->TextOr("host", "[::]");
  absl::StatusOr<rdzv::RendezvousServer::Options> options = ServeOptions(*values, host);
  if (!options.ok()) return UsageError(kServe, options.status().message());
  InitLogging(values->TextOr("log-level", "info"));

  // Block the stop signals before gRPC starts its threads, then wait for one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::unique_ptr<metrics::MetricsServer> exposer;
  std::shared_ptr<metrics::ServerMetrics> metered;
  if (auto port = values->Get("metrics-port")) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsServer>> started =
        metrics::MetricsServer::Start(JoinHostPort(host, port->text), "--metrics-port");
    if (!started.ok()) {
      int code = exit_code::ForStatus(started.status());
      spdlog::error("{}; exiting {}", std::string(started.status().message()), code);
      return code;
    }
    exposer = *std::move(started);
    metered = metrics::ServerMetrics::Create(exposer.get());
    options->observer = metered;
  }
  absl::StatusOr<std::unique_ptr<rdzv::RendezvousServer>> server =
      rdzv::RendezvousServer::Start(*options);
  if (!server.ok()) {
    // A bad certificate is permanent (2), a port in use may pass (138).
    int code = exit_code::ForStatus(server.status());
    spdlog::error("cannot serve: {}; exiting {}", std::string(server.status().message()), code);
    return code;
  }
  if (metered) metered->SetCounts([s = server->get()] { return s->Counts(); });
  if (auto dir = values->Get("log-dir")) {
    if (absl::Status st = KeepTraces(dir->text, server->get()); !st.ok()) {
      return UsageError(kServe, st.message());
    }
  }
  std::printf("muster serve: listening on %s\n", JoinHostPort(host, (*server)->port()).c_str());
  std::fflush(stdout);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  spdlog::info("received signal {}: stopping the rendezvous server", sig);
  if (metered) metered->SetCounts(nullptr);  // before the server goes
  (*server)->Shutdown();
  return exit_code::kSuccess;
}

}  // namespace muster

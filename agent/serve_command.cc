// `muster serve`: the rendezvous server on its own, for elastic jobs whose server must
// outlive every worker pod. Serves until SIGTERM/SIGINT, then exits 0.
#include <signal.h>

#include <cstdio>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "agent/flag_table.h"
#include "agent/subcommands.h"
#include "agent/wire_values.h"
#include "base/duration.h"
#include "base/logging.h"
#include "rendezvous/grpc/server.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

constexpr FlagSpec kServeFlags[] = {
    {"host", 0, true, "Serve", "[::]", "address to listen on"},
    {"port", 0, true, "Serve", "29400", "port to listen on (0: any free port, printed)"},
    {"rdzv-id", 0, true, "Serve", "any", "serve only this run id"},
    {"heartbeat-interval", 0, true, "Serve", "5s",
     "TCP keepalive probe after this much silence on an agent's connection"},
    {"heartbeat-misses", 0, true, "Serve", "3",
     "an agent silent for interval x misses is lost (its connection is reset)"},
    {"token-file", 0, true, "Security", "MUSTER_TOKEN", "file with the shared secret"},
    {"tls-cert", 0, true, "Security", "none", "PEM certificate"},
    {"tls-key", 0, true, "Security", "none", "PEM key"},
    {"log-level", 0, true, "Output", "info", "log level"},
};

int Usage(const std::string& message) {
  std::fprintf(stderr, "muster serve: %s\n", message.c_str());
  return 2;
}

}  // namespace

int ServeCommand(const std::vector<std::string>& args,
                 const std::map<std::string, std::string>& env) {
  if (HelpRequested(args, kServeFlags)) {
    std::printf("Usage: muster serve [flags]\n\nServes the rendezvous of muster jobs.\n%s",
                FlagHelp(kServeFlags).c_str());
    return 0;
  }
  absl::StatusOr<SplitArgs> split = SplitFlags(args, kServeFlags, "muster serve");
  if (!split.ok()) return Usage(std::string(split.status().message()));
  FlagValues values(*std::move(split), env);
  if (!values.rest().empty()) return Usage("takes no arguments, got '" + values.rest()[0] + "'");
  rdzv::RendezvousServer::Options options;
  std::string host = values.Get("host") ? values.Get("host")->first : "[::]";
  std::string port = values.Get("port") ? values.Get("port")->first : "29400";
  options.listen_address = absl::StrCat(host, ":", port);
  if (auto id = values.Get("rdzv-id")) {
    if (absl::Status st = CheckRunId(id->second, id->first); !st.ok()) {
      return Usage(std::string(st.message()));
    }
    options.run_id = id->first;
  }
  if (auto v = values.Get("heartbeat-interval")) {
    absl::StatusOr<absl::Duration> d = ParseDuration(v->first);
    if (!d.ok() || *d <= absl::ZeroDuration()) {
      return Usage("--heartbeat-interval needs a positive duration (5s, 500ms), got '" + v->first +
                   "'");
    }
    options.heartbeat_interval = *d;
  }
  if (auto v = values.Get("heartbeat-misses")) {
    if (!absl::SimpleAtoi(v->first, &options.heartbeat_misses) || options.heartbeat_misses < 1) {
      return Usage("--heartbeat-misses needs a whole number >= 1, got '" + v->first + "'");
    }
  }
  absl::StatusOr<std::string> token = ResolveToken(values.Get("token-file"), env);
  if (!token.ok()) return Usage(std::string(token.status().message()));
  options.token = *token;
  if (auto c = values.Get("tls-cert")) options.tls_cert_file = c->first;
  if (auto k = values.Get("tls-key")) options.tls_key_file = k->first;
  InitLogging(values.Get("log-level") ? values.Get("log-level")->first : "info");

  // Block the stop signals before gRPC starts its threads, then wait for one.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  absl::StatusOr<std::unique_ptr<rdzv::RendezvousServer>> server =
      rdzv::RendezvousServer::Start(options);
  if (!server.ok()) {
    spdlog::error("cannot serve: {}", std::string(server.status().message()));
    return 138;
  }
  std::printf("muster serve: listening on %s:%d\n", host.c_str(), (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  spdlog::info("received signal {}: stopping the rendezvous server", sig);
  (*server)->Shutdown();
  return 0;
}

}  // namespace muster

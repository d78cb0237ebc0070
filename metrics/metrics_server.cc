#include "metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <exception>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/unique_fd.h"
#include "metrics/process_collector.h"
#include "prometheus/exposer.h"
#include "prometheus/registry.h"
#include "spdlog/spdlog.h"

namespace muster::metrics {
namespace {

// civetweb's mg_start sets SIGCHLD (and SIGPIPE) to SIG_IGN for the whole process. An
// ignored SIGCHLD makes the kernel reap children at once, and the agent would lose its
// workers' exit codes: the dispositions are put back as they were.
class KeepChildSignals {
 public:
  KeepChildSignals() {
    ok_ = sigaction(SIGCHLD, nullptr, &chld_) == 0 && sigaction(SIGPIPE, nullptr, &pipe_) == 0;
  }
  ~KeepChildSignals() {
    if (!ok_) return;
    if (sigaction(SIGCHLD, &chld_, nullptr) != 0 || sigaction(SIGPIPE, &pipe_, nullptr) != 0) {
      spdlog::error("metrics: cannot restore the SIGCHLD/SIGPIPE dispositions: {}",
                    std::string(ErrnoStatus("sigaction", errno).message()));
    }
  }
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
  struct sigaction chld_ {};
  struct sigaction pipe_ {};
};

// Connects to `host`:`port` and hangs up at once; errors are ignored (the listener may be
// closing). A connection on loopback is made by the kernel within connect().
void Poke(const std::string& host, int port) {
  sockaddr_in6 v6{};
  sockaddr_in v4{};
  const bool is_v6 = inet_pton(AF_INET6, host.c_str(), &v6.sin6_addr) == 1;
  if (!is_v6 && inet_pton(AF_INET, host.c_str(), &v4.sin_addr) != 1) return;
  UniqueFd fd(socket(is_v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return;
  timeval limit{.tv_sec = 0, .tv_usec = 100000};  // a connect never waits longer
  if (setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit)) != 0) return;
  v6.sin6_family = AF_INET6;
  v6.sin6_port = htons(static_cast<uint16_t>(port));
  v4.sin_family = AF_INET;
  v4.sin_port = htons(static_cast<uint16_t>(port));
  // The result does not matter: a refused or timed-out connect also means nothing to wait for.
  (void)(is_v6 ? connect(fd.get(), reinterpret_cast<sockaddr*>(&v6), sizeof(v6))
               : connect(fd.get(), reinterpret_cast<sockaddr*>(&v4), sizeof(v4)));
}

}  // namespace

std::string LocalHostOf(const std::string& listen_address) {
  std::string host = listen_address.substr(0, listen_address.rfind(':'));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty() || host == "::" || host == "0.0.0.0") return "127.0.0.1";
  return host;
}

std::string CivetListeningPort(const std::string& listen_address) {
  if (absl::StartsWith(listen_address, "[::]:")) return absl::StrCat("+", listen_address.substr(5));
  return listen_address;
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    const std::string& listen_address, const std::string& flag) {
  std::unique_ptr<prometheus::Exposer> exposer;
  {
    KeepChildSignals keep;
    if (!keep.ok()) return ErrnoStatus("sigaction", errno);
    try {
      // Two threads: a scrape and a person's curl at once; no more is ever needed.
      exposer = std::make_unique<prometheus::Exposer>(std::vector<std::string>{
          "listening_ports", CivetListeningPort(listen_address), "num_threads", "2"});
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(flag, ": cannot listen on ", listen_address, " (",
                                                 e.what(), "; port in use?)"));
    }
  }
  std::vector<int> ports = exposer->GetListeningPorts();
  const int port = ports.empty() ? 0 : ports.front();
  auto registry = std::make_shared<prometheus::Registry>();
  exposer->RegisterCollectable(registry);
  std::unique_ptr<MetricsServer> server(
      new MetricsServer(std::move(exposer), registry, port, LocalHostOf(listen_address)));
  server->Add(std::make_shared<ProcessCollector>());
  spdlog::info("metrics: Prometheus /metrics on {} (port {})", listen_address, port);
  return server;
}

MetricsServer::MetricsServer(std::unique_ptr<prometheus::Exposer> exposer,
                             std::shared_ptr<prometheus::Registry> registry, int port,
                             std::string wake_host)
    : exposer_(std::move(exposer)),
      registry_(std::move(registry)),
      port_(port),
      wake_host_(std::move(wake_host)) {}

MetricsServer::~MetricsServer() {
  // The exposer goes first: no scrape runs once it is gone. Its mg_stop waits for civetweb's
  // accept thread, which sees the stop only when its poll() returns: on a connection, or
  // when its 2 s timeout passes (every agent's exit took 2 s longer). Connections of our own
  // end that wait; the stop is awaited for at most 3 s in all.
  std::atomic<bool> stopped{false};
  std::thread stopper([this, &stopped] {
    exposer_.reset();
    stopped = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (!stopped && std::chrono::steady_clock::now() < deadline) {
    Poke(wake_host_, port_);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  stopper.join();
}

void MetricsServer::Add(std::shared_ptr<prometheus::Collectable> collectable) {
  exposer_->RegisterCollectable(collectable);
  collectables_.push_back(std::move(collectable));
}

}  // namespace muster::metrics

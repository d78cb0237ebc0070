// Test fixture: a standalone store server. Usage: c10d_store_server [PORT
// [BIND_ADDRESS]]. Prints "PORT <n>" on stdout once it accepts connections;
// exits 0 on SIGTERM/SIGINT.
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/logging.h"
#include "rendezvous/c10d/store_server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // Block the stop signals before the loop thread exists, so only sigwait sees
  // them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  const char* level = std::getenv("MUSTER_LOG_LEVEL");
  muster::InitLogging(level != nullptr ? level : "info");

  muster::c10d::StoreServer::Options options;
  if (argc > 1) {
    char* end = nullptr;
    long port = std::strtol(argv[1], &end, 10);
    if (*end != '\0' || port < 0 || port > 65535) {
      std::fprintf(stderr, "usage: %s [PORT [BIND_ADDRESS]]\n", argv[0]);
      return 2;
    }
    options.port = static_cast<uint16_t>(port);
  }
  if (argc > 2) options.bind_address = argv[2];

  auto server = muster::c10d::StoreServer::Start(options);
  if (!server.ok()) {
    spdlog::error("cannot start store: {}", std::string(server.status().message()));
    return 1;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  std::printf("PORT %u\n", static_cast<unsigned>((*server)->port()));

  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: stopping store", sig);
  (*server)->Shutdown();
  return 0;
}

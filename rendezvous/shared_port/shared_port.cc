#include "rendezvous/shared_port/shared_port.h"

#include <utility>

#include "base/status_macros.h"
#include "rendezvous/c10d/listener.h"
#include "rendezvous/shared_port/shared_port_loop.h"
#include "spdlog/spdlog.h"

namespace muster::shared_port {

absl::StatusOr<std::unique_ptr<SharedPort>> SharedPort::Start(Options options) {
  ASSIGN_OR_RETURN(c10d::BoundListener listener,
                   c10d::Listen(options.bind_address, options.port, "rendezvous and store"));
  ASSIGN_OR_RETURN(std::unique_ptr<SharedPortLoop> loop,
                   SharedPortLoop::Create(std::move(listener.fd), std::move(options)));
  std::unique_ptr<SharedPort> port(
      new SharedPort(std::move(loop), listener.port, std::move(listener.address)));
  SharedPortLoop* raw = port->loop_.get();
  port->thread_ = std::thread([raw] { raw->Run(); });
  spdlog::info("rendezvous server listening on {}, the c10d store sharing the port",
               port->address_);
  return port;
}

SharedPort::SharedPort(std::unique_ptr<SharedPortLoop> loop, uint16_t port, std::string address)
    : loop_(std::move(loop)), port_(port), address_(std::move(address)) {}

SharedPort::~SharedPort() {
  loop_->Stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace muster::shared_port

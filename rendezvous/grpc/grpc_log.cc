#include "rendezvous/grpc/grpc_log.h"

#include <grpc/support/log.h>

#include <cstring>
#include <string_view>

#include "spdlog/spdlog.h"

namespace muster::rdzv {
namespace {

void Forward(gpr_log_func_args* args) {
  std::string_view file = args->file != nullptr ? args->file : "?";
  if (size_t slash = file.rfind('/'); slash != std::string_view::npos) {
    file.remove_prefix(slash + 1);
  }
  const char* message = args->message != nullptr ? args->message : "";
  bool assertion = std::strncmp(message, "assertion failed", 16) == 0;
  spdlog::level::level_enum level = assertion ? spdlog::level::critical
                                    : args->severity == GPR_LOG_SEVERITY_ERROR
                                        ? spdlog::level::debug
                                        : spdlog::level::trace;
  spdlog::log(level, "grpc: {} ({}:{})", message, file, args->line);
}

}  // namespace

void RouteGrpcLogsToSpdlog() { gpr_set_log_function(&Forward); }

}  // namespace muster::rdzv

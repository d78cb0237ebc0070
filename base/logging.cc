#include "base/logging.h"

#include <string>

#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {
constexpr char kPattern[] = "[muster %Y-%m-%d %H:%M:%S.%e %^%l%$] %v";

// kPattern with `tag` after the level; a '%' in it is written as itself.
std::string PatternWithTag(std::string_view tag) {
  if (tag.empty()) return kPattern;
  std::string escaped;
  for (char ch : tag) {
    if (ch == '%') escaped += '%';
    escaped += ch;
  }
  return "[muster %Y-%m-%d %H:%M:%S.%e %^%l%$ " + escaped + "] %v";
}
}  // namespace

void InitLogging(std::string_view level) {
  // Unbuffered stderr sink: a log line must be out before the agent can die
  // (SIGKILL) or exec. The _mt variant costs an uncontended mutex per line,
  // which is nothing here.
  auto logger = spdlog::stderr_logger_mt("muster");
  logger->set_pattern(kPattern);
  logger->flush_on(spdlog::level::trace);
  spdlog::level::level_enum parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") parsed = spdlog::level::info;
  logger->set_level(parsed);
  spdlog::set_default_logger(logger);
}

void SetLogNodeTag(std::string_view tag) {
  spdlog::default_logger()->set_pattern(PatternWithTag(tag));
}

void SetLogSink(std::shared_ptr<spdlog::sinks::sink> sink) {
  sink->set_pattern(kPattern);
  spdlog::default_logger()->sinks() = {std::move(sink)};
}

}  // namespace muster

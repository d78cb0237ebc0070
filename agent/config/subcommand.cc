#include "agent/config/subcommand.h"

#include <cstdio>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "base/exit_codes.h"

namespace muster {
namespace {

absl::string_view View(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

std::string SubcommandHelp(const Subcommand& command) {
  return absl::StrCat(View(command.usage), FlagHelp(command.flags), View(command.epilogue));
}

std::string SubcommandMarkdown(const Subcommand& command) {
  std::string out = absl::StrCat("## muster ", View(command.name), "\n\n```text\n",
                                 View(command.usage), "```\n", FlagMarkdown(command.flags));
  if (!command.epilogue.empty()) {
    std::string_view epilogue = command.epilogue;
    while (!epilogue.empty() && epilogue.front() == '\n') epilogue.remove_prefix(1);
    absl::StrAppend(&out, "\n```text\n", View(epilogue), "```\n");
  }
  return out;
}

std::optional<FlagValues> StartSubcommand(const Subcommand& command,
                                          const std::vector<std::string>& args,
                                          const std::map<std::string, std::string>& env,
                                          int* exit_code) {
  if (HelpRequested(args, command.flags)) {
    std::fputs(SubcommandHelp(command).c_str(), stdout);
    *exit_code = exit_code::kSuccess;
    return std::nullopt;
  }
  absl::StatusOr<SplitArgs> split =
      SplitFlags(args, command.flags, absl::StrCat("muster ", View(command.name)));
  if (!split.ok()) {
    *exit_code = UsageError(command, split.status().message());
    return std::nullopt;
  }
  return FlagValues(*std::move(split), env);
}

int UsageError(const Subcommand& command, absl::string_view message) {
  std::fprintf(stderr, "muster %.*s: %.*s\n", static_cast<int>(command.name.size()),
               command.name.data(), static_cast<int>(message.size()), message.data());
  return exit_code::kUsage;
}

}  // namespace muster

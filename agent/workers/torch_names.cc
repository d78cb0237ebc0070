#include "agent/workers/torch_names.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace muster {

std::optional<TorchVersion> ParseTorchVersion(std::string_view text) {
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::string_view(text.data(), text.size()), absl::MaxSplits('.', 2));
  if (parts.size() < 2) return std::nullopt;
  // The minor number may carry a suffix when there is no patch number ("2.6a0").
  absl::string_view minor = parts[1];
  size_t digits = 0;
  while (digits < minor.size() && minor[digits] >= '0' && minor[digits] <= '9') ++digits;
  TorchVersion v;
  if (digits == 0 || !absl::SimpleAtoi(parts[0], &v.major) ||
      !absl::SimpleAtoi(minor.substr(0, digits), &v.minor) || v.major < 0) {
    return std::nullopt;
  }
  return v;
}

std::vector<const char*> NamesFor(const RenamedVariable& variable,
                                  const std::optional<TorchVersion>& torch) {
  if (!torch) return {variable.name, variable.old_name};
  const TorchVersion& since = variable.renamed_in;
  return {torch->AtLeast(since.major, since.minor) ? variable.name : variable.old_name};
}

std::string LegacyLocalRankArgument(const std::optional<TorchVersion>& torch, int local_rank) {
  const bool underscore = torch && !torch->AtLeast(2, 0);
  return absl::StrCat(underscore ? "--local_rank=" : "--local-rank=", local_rank);
}

}  // namespace muster

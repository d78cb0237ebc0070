#include "nccl_probe/nccl_version.h"

#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace muster::probe {

NcclVersion NcclVersion::FromCode(int code) {
  if (code >= 10000) return {code / 10000, (code % 10000) / 100, code % 100};
  return {code / 1000, (code % 1000) / 100, code % 100};
}

absl::StatusOr<NcclVersion> NcclVersion::Parse(std::string_view text) {
  std::vector<std::string> parts = absl::StrSplit(absl::string_view(text.data(), text.size()), '.');
  NcclVersion v;
  int* fields[] = {&v.major, &v.minor, &v.patch};
  bool ok = parts.size() >= 2 && parts.size() <= 3;
  for (size_t i = 0; ok && i < parts.size(); ++i) {
    ok = absl::SimpleAtoi(parts[i], fields[i]) && *fields[i] >= 0;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid NCCL version \"", std::string(text), "\" (want e.g. 2.18.1)"));
  }
  return v;
}

std::string NcclVersion::ToString() const { return absl::StrCat(major, ".", minor, ".", patch); }

}  // namespace muster::probe

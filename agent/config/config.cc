#include "agent/config/config.h"

#include <utility>

namespace muster {
namespace {

// Every mode of one kind with its flag spelling, in the order --help and errors list them.
template <typename Mode>
struct Spellings;
template <>
struct Spellings<ProbeMode> {
  static constexpr std::pair<ProbeMode, const char*> kAll[] = {{ProbeMode::kOff, "off"},
                                                               {ProbeMode::kAuto, "auto"},
                                                               {ProbeMode::kInventory, "inventory"},
                                                               {ProbeMode::kNccl, "nccl"}};
};
template <>
struct Spellings<StaleGpuPolicy> {
  static constexpr std::pair<StaleGpuPolicy, const char*> kAll[] = {
      {StaleGpuPolicy::kFail, "fail"},
      {StaleGpuPolicy::kWait, "wait"},
      {StaleGpuPolicy::kKill, "kill"}};
};
template <>
struct Spellings<StoreOwner> {
  static constexpr std::pair<StoreOwner, const char*> kAll[] = {{StoreOwner::kAgent, "agent"},
                                                                {StoreOwner::kRank0, "rank0"}};
};
template <>
struct Spellings<RdzvHosting> {
  static constexpr std::pair<RdzvHosting, const char*> kAll[] = {
      {RdzvHosting::kAuto, "auto"}, {RdzvHosting::kAlways, "true"}, {RdzvHosting::kNever, "false"}};
};

template <typename Mode>
const char* NameOf(Mode mode) {
  for (const auto& [m, name] : Spellings<Mode>::kAll) {
    if (m == mode) return name;
  }
  return "?";  // not reached: every enumerator has a spelling
}

}  // namespace

const char* ModeName(ProbeMode mode) { return NameOf(mode); }
const char* ModeName(StaleGpuPolicy policy) { return NameOf(policy); }
const char* ModeName(StoreOwner store) { return NameOf(store); }
const char* ModeName(RdzvHosting hosting) { return NameOf(hosting); }

template <typename Mode>
std::optional<Mode> ParseMode(std::string_view name) {
  for (const auto& [mode, spelling] : Spellings<Mode>::kAll) {
    if (name == spelling) return mode;
  }
  return std::nullopt;
}

template <typename Mode>
std::string ModeNames() {
  std::string out;
  const auto& all = Spellings<Mode>::kAll;
  for (size_t i = 0; i < std::size(all); ++i) {
    if (i > 0) out += i + 1 == std::size(all) ? " or " : ", ";
    out += all[i].second;
  }
  return out;
}

template std::optional<ProbeMode> ParseMode<ProbeMode>(std::string_view);
template std::optional<StaleGpuPolicy> ParseMode<StaleGpuPolicy>(std::string_view);
template std::optional<StoreOwner> ParseMode<StoreOwner>(std::string_view);
template std::optional<RdzvHosting> ParseMode<RdzvHosting>(std::string_view);
template std::string ModeNames<ProbeMode>();
template std::string ModeNames<StaleGpuPolicy>();
template std::string ModeNames<StoreOwner>();
template std::string ModeNames<RdzvHosting>();

int StreamSelection::For(int local_rank) const {
  auto it = by_rank.find(local_rank);
  if (it != by_rank.end()) return it->second;
  it = by_rank.find(kAllRanks);
  return it == by_rank.end() ? 0 : it->second;
}

std::string Config::SourceOf(const char* flag) const {
  auto it = sources.find(flag);
  return it == sources.end() ? std::string("--") + flag : it->second;
}

}  // namespace muster

// BadNodes (bad_nodes.h): counting root causes per host, and the text a quarantine shows.
#include "rendezvous/core/bad_nodes.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace muster::rdzv {

bool BadNodes::Record(int round, const Failure& root_cause) {
  if (root_cause.kind != FailureKind::kWorker && root_cause.kind != FailureKind::kHung) {
    return false;
  }
  Host& h = hosts_[root_cause.host];
  ++h.count;
  std::string reason =
      absl::StrCat("round ", round, ": rank ", root_cause.rank, " ", root_cause.what);
  if (std::string detail = FailureDetail(root_cause); !detail.empty()) {
    absl::StrAppend(&reason, ": ", detail);
  }
  h.reasons.push_back(std::move(reason));
  if (h.reasons.size() > kMaxReasons) h.reasons.erase(h.reasons.begin());
  return !h.quarantined && quarantine_after_ > 0 && h.count == quarantine_after_;
}

void BadNodes::Replay(const std::vector<RestartRecord>& history) {
  for (const RestartRecord& r : history) {
    if (r.counted && r.failure) Record(r.round, *r.failure);
  }
}

std::vector<std::string> BadNodes::Due() const {
  std::vector<std::string> due;
  if (quarantine_after_ < 1) return due;
  for (const auto& [host, h] : hosts_) {
    if (!h.quarantined && h.count >= quarantine_after_) due.push_back(host);
  }
  return due;
}

bool BadNodes::quarantined(const std::string& host) const {
  auto it = hosts_.find(host);
  return it != hosts_.end() && it->second.quarantined;
}

void BadNodes::Quarantine(const std::string& host) { hosts_[host].quarantined = true; }

int BadNodes::count(const std::string& host) const {
  auto it = hosts_.find(host);
  return it == hosts_.end() ? 0 : it->second.count;
}

std::string BadNodes::Reason(const std::string& host) const {
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return "";
  const Host& h = it->second;
  return absl::StrCat("quarantined: root cause of ", h.count, " failed attempts (",
                      absl::StrJoin(h.reasons, "; "), ")");
}

}  // namespace muster::rdzv

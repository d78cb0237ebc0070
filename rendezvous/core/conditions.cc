#include "rendezvous/core/conditions.h"

#include <utility>

namespace muster::rdzv {

Conditions::Conditions(absl::Time now) {
  auto add = [&](const char* type, bool status, const char* reason, const char* message) {
    all_.push_back(Condition{.type = type,
                             .status = status,
                             .reason = reason,
                             .message = message,
                             .last_transition = now});
  };
  add(kConditionCreated, true, "NodeJoined", "the first node joined");
  add(kConditionRunning, false, "Gathering", "waiting for the first round");
  add(kConditionRestarting, false, "Gathering", "no restart yet");
  add(kConditionSucceeded, false, "NotFinished", "the job has not finished");
  add(kConditionFailed, false, "NotFinished", "the job has not finished");
}

void Conditions::Set(const std::string& type, bool status, std::string reason, std::string message,
                     absl::Time now) {
  for (Condition& c : all_) {
    if (c.type != type) continue;
    if (c.status != status) c.last_transition = now;
    c.status = status;
    c.reason = std::move(reason);
    c.message = std::move(message);
    return;
  }
}

const Condition* Conditions::Find(const std::string& type) const {
  for (const Condition& c : all_) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

}  // namespace muster::rdzv

#include "rendezvous/core/conditions.h"

#include <utility>

namespace muster::rdzv {

Conditions::Conditions(absl::Time now) {
  all_.push_back({kConditionCreated, true, "NodeJoined", "the first node joined", now});
  all_.push_back({kConditionRunning, false, "Gathering", "waiting for the first round", now});
  all_.push_back({kConditionRestarting, false, "Gathering", "no restart yet", now});
  all_.push_back({kConditionSucceeded, false, "NotFinished", "the job has not finished", now});
  all_.push_back({kConditionFailed, false, "NotFinished", "the job has not finished", now});
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

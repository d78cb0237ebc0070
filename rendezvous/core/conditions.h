// Conditions: a job's Kubernetes-style conditions (docs/design.md §4.6, seeds/001's DeepSpeedJob
// status). A fixed set of types, each True or False with a reason, a message and the time
// its status last flipped. Setting a condition to the status it already has updates the
// reason and message but keeps the transition time, as Kubernetes does.
//
// Plain data with a fake-clock-friendly API (every call takes `now`). Not thread-safe.
#ifndef MUSTER_RENDEZVOUS_CORE_CONDITIONS_H_
#define MUSTER_RENDEZVOUS_CORE_CONDITIONS_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "rendezvous/core/types.h"

namespace muster::rdzv {

// The condition types of a job, in the order they are listed.
inline constexpr char kConditionCreated[] = "Created";        // a node joined: the job exists
inline constexpr char kConditionRunning[] = "Running";        // a round's workers run
inline constexpr char kConditionRestarting[] = "Restarting";  // between rounds
inline constexpr char kConditionSucceeded[] = "Succeeded";
inline constexpr char kConditionFailed[] = "Failed";

class Conditions {
 public:
  // Created is True from `now` (reason "NodeJoined"); the others start False.
  explicit Conditions(absl::Time now);

  // Sets `type` (one of the kCondition* names; others are ignored).
  void Set(const std::string& type, bool status, std::string reason, std::string message,
           absl::Time now);
  // nullptr for an unknown type.
  const Condition* Find(const std::string& type) const;
  const std::vector<Condition>& all() const { return all_; }

 private:
  std::vector<Condition> all_;
};

}  // namespace muster::rdzv

#endif  // MUSTER_RENDEZVOUS_CORE_CONDITIONS_H_

// What tests/fuzz/rendezvous_fuzz.cc checks: the wire conversions of every muster.v1
// message the server or an agent decodes (WireRoundTrips), and the invariants of one
// rdzv::Job around each call a session makes on it (JobChecker). A broken invariant
// aborts the process (Fail), which libFuzzer reports with the input.
#ifndef MUSTER_TESTS_FUZZ_RENDEZVOUS_FUZZ_CHECKS_H_
#define MUSTER_TESTS_FUZZ_RENDEZVOUS_FUZZ_CHECKS_H_

#include <cstddef>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "rendezvous/core/job.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace muster::rdzv::fuzz {

[[noreturn]] void Fail(const std::string& what);

#define CHECK_OR_FAIL(cond, what) \
  if (!(cond)) ::muster::rdzv::fuzz::Fail(absl::StrCat(#cond, ": ", what))

// The message's wire bytes.
std::string Bytes(const google::protobuf::Message& m);

// "id(hint) id(hint) ...", for messages.
std::string Ids(const std::vector<NodeInfo>& nodes);

// Parses `bytes` as each message the server or an agent decodes and converts it to plain
// data and back: a second round trip must give the same bytes as the first.
void WireRoundTrips(const std::string& bytes);

// One job as the registry holds it, plus what the invariants remember between steps.
struct Tracked {
  Tracked(const JobSpec& spec, absl::Time now) : job(spec, now) {}
  Job job;
  int round = 0;
  int restarts = 0;
  size_t history = 0;
  std::optional<Outcome> outcome;
  std::vector<NodeInfo> previous_round;  // participants of the last round started
};

// The invariants of one job around one call on it: Before() remembers what the call must
// not undo, After() checks the job and the events the call produced. Not thread-safe.
class JobChecker {
 public:
  explicit JobChecker(bool trace) : trace_(trace) {}

  void Before(const Tracked& t);
  // Invariants after one call on `t` that produced `events`: counters monotonic and the
  // budget counted once per counted restart, the outcome final, membership and the round's
  // workers consistent, events only for live nodes and unchanged by the wire, each round's
  // layout consistent (ranks a permutation with consistent bases, survivors keep their
  // order, rank hints honoured, no quarantined host in it), spares within --spares, and
  // the Quarantined state, spare and quarantine events that agree with the bad-node memory.
  void After(Tracked& t, const std::vector<Event>& events);

 private:
  void CheckCounters(Tracked& t);
  void CheckOutcome(Tracked& t);
  // Returns the ids of the live nodes.
  std::set<std::string> CheckMembers(const Tracked& t);
  void CheckWorkers(const Tracked& t);
  void CheckEvents(Tracked& t, const std::vector<Event>& events,
                   const std::set<std::string>& live_ids);
  void CheckRound(Tracked& t, int round, const std::vector<const Event*>& started);

  const bool trace_;
  bool finished_before_ = false;
  std::set<std::string> live_before_;
};

}  // namespace muster::rdzv::fuzz

#endif  // MUSTER_TESTS_FUZZ_RENDEZVOUS_FUZZ_CHECKS_H_

// Shared by the round-trip tests of rendezvous/wire (*_convert_test.cc): distinct field
// values, and the fields of a message its ToProto left at their default. A proto field
// added later and not written by its ToProto shows up in UnsetFields of the message made
// from a fully populated struct, and fails the test until ToProto writes it (or the test's
// allow-list says why it legitimately stays unset).
#ifndef MUSTER_RENDEZVOUS_WIRE_WIRE_TEST_UTIL_H_
#define MUSTER_RENDEZVOUS_WIRE_WIRE_TEST_UTIL_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "rendezvous/core/traces.h"

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace muster::rdzv::wire::wire_test {

// Every value it hands out differs from every other (and from each field's default), so
// that a conversion that swaps two fields or drops one fails the comparison.
class Distinct {
 public:
  int Int() { return next_++; }
  int64_t Int64() { return int64_t{1} << 40 | next_++; }
  double Double() { return next_++ + 0.25; }
  std::string Str(const std::string& what) { return what + "-" + std::to_string(next_++); }
  // Whole milliseconds: the wire carries durations and times in ms.
  absl::Duration Ms() { return absl::Milliseconds(next_++); }
  absl::Time UnixMs() { return absl::FromUnixMillis(int64_t{1700000000000} + next_++); }

 private:
  int next_ = 7;
};

// The fields of `m` left at their default, recursively, as dotted paths without indexes
// ("ranks.text"): a scalar at its default value, a message field absent, a repeated field
// with fewer than 2 elements ("nodes[<2]": one element would not show a conversion that
// handles only the first). Of a oneof only the member set is looked at; a oneof with none
// set is listed by its name.
std::set<std::string> UnsetFields(const google::protobuf::Message& m);

// A TracesSummary with every field set (the TracesStored test, and the events and status
// that carry one).
TracesSummary FullTracesSummary(Distinct& d);

}  // namespace muster::rdzv::wire::wire_test

#endif  // MUSTER_RENDEZVOUS_WIRE_WIRE_TEST_UTIL_H_

#ifndef MUSTER_AGENT_TEST_HELPERS_H_
#define MUSTER_AGENT_TEST_HELPERS_H_

// Helpers shared by the agent's unit tests (header-only: tests link gtest, the library
// does not).

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace muster::testing_helpers {

// KEY=VALUE strings (a worker's environment) as a map.
inline std::map<std::string, std::string> AsMap(const std::vector<std::string>& env) {
  std::map<std::string, std::string> m;
  for (const std::string& kv : env) m[kv.substr(0, kv.find('='))] = kv.substr(kv.find('=') + 1);
  return m;
}

// The status is InvalidArgument and its message contains `needle`.
inline void ExpectInvalid(const absl::Status& status, const std::string& needle) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(status.message()).find(needle), std::string::npos) << status.message();
}

}  // namespace muster::testing_helpers

#endif  // MUSTER_AGENT_TEST_HELPERS_H_

#include "agent/diagnostics/flight_recorder.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(FlightRecorderTest, SetsBothSpellingsUnlessTheUserSetEither) {
  std::vector<std::string> env = {"A=1", "TORCH_NCCL_TRACE_BUFFER_SIZE=50", "Z=1"};
  AddFlightRecorderEnv("/run/attempt_2", std::nullopt, &env);  // the workers' torch unknown
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
  EXPECT_EQ(env, (std::vector<std::string>{
                     "A=1",
                     "TORCH_FR_DUMP_ON_TIMEOUT=1",
                     "TORCH_FR_DUMP_TEMP_FILE=/run/attempt_2/flight_recorder_rank_",
                     "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/run/attempt_2/flight_recorder_rank_",
                     "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
                     "TORCH_NCCL_TRACE_BUFFER_SIZE=50",  // the user's, and no TORCH_FR_ one
                     "Z=1",
                 }));
}

// Issue 28: torch 2.15 warns once per rank about TORCH_NCCL_TRACE_BUFFER_SIZE ("is
// deprecated; use TORCH_FR_BUFFER_SIZE"); torch 2.2-2.9 read only the TORCH_NCCL_ names.
TEST(FlightRecorderTest, SetsTheSpellingTheWorkersTorchReads) {
  std::vector<std::string> env = {"A=1"};
  AddFlightRecorderEnv("/run/attempt_0", TorchVersion{2, 15}, &env);
  EXPECT_EQ(env, (std::vector<std::string>{
                     "A=1",
                     "TORCH_FR_BUFFER_SIZE=2000",
                     "TORCH_FR_DUMP_ON_TIMEOUT=1",
                     "TORCH_FR_DUMP_TEMP_FILE=/run/attempt_0/flight_recorder_rank_",
                 }));
  env = {"A=1"};
  AddFlightRecorderEnv("/run/attempt_0", TorchVersion{2, 6}, &env);
  EXPECT_EQ(env, (std::vector<std::string>{
                     "A=1",
                     "TORCH_NCCL_DEBUG_INFO_TEMP_FILE=/run/attempt_0/flight_recorder_rank_",
                     "TORCH_NCCL_DUMP_ON_TIMEOUT=1",
                     "TORCH_NCCL_TRACE_BUFFER_SIZE=2000",
                 }));
}

TEST(FlightRecorderTest, NoteNamesTheAttemptsTraceFiles) {
  char tmpl[] = "/tmp/fr_test_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string attempt = tmpl;
  ASSERT_EQ(mkdir((attempt + "/0").c_str(), 0755), 0);
  EXPECT_EQ(FlightRecorderNote(attempt + "/0"), "");
  for (const char* name : {"flight_recorder_rank_1", "flight_recorder_rank_0", "other"}) {
    FILE* f = fopen((attempt + "/" + name).c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
  }
  EXPECT_EQ(FlightRecorderNote(attempt + "/0"), " (flight recorder traces: " + attempt +
                                                    "/flight_recorder_rank_0, " + attempt +
                                                    "/flight_recorder_rank_1)");
  EXPECT_EQ(FlightRecorderNote(""), "");
  std::system(("rm -rf " + attempt).c_str());
}

}  // namespace
}  // namespace muster

#include "agent/diagnostics/stack_report.h"

#include <string>

#include "agent/diagnostics/stack_hook.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

// Python 3.11's faulthandler, all_threads=True: a helper thread, then the main thread.
constexpr char kAllReduce[] =
    "Thread 0x00007f7c387746c0 (most recent call first):\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 995 in _bootstrap\n"
    "\n"
    "Current thread 0x00007f7c38b2f040 (most recent call first):\n"
    "  File \"/t/torch/distributed/distributed_c10d.py\", line 1536 in all_reduce\n"
    "  File \"/w/train.py\", line 57 in step\n"
    "  File \"/w/train.py\", line 80 in <module>\n";

std::string Stuck(int line) {
  return "Current thread 0x1 (most recent call first):\n"
         "  File \"/w/train.py\", line " +
         std::to_string(line) +
         " in stuck_here\n"
         "  File \"/w/train.py\", line 80 in <module>\n";
}

TEST(StackReportTest, ParsesThreadsAndPicksTheOneRunningTheScript) {
  std::vector<ThreadStack> threads = ParseFaulthandler(kAllReduce);
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads[0].id, "0x00007f7c387746c0");
  EXPECT_FALSE(threads[0].current);
  EXPECT_TRUE(threads[1].current);
  ASSERT_EQ(threads[1].frames.size(), 3u);
  EXPECT_EQ(threads[1].frames[1], (StackFrame{"/w/train.py", 57, "step"}));
  EXPECT_EQ(MainThread(threads), &threads[1]);
  EXPECT_EQ(OneLine(threads[1].frames), "all_reduce <- train.py:57 step <- train.py:80 <module>");
  EXPECT_EQ(OneLine(threads[1].frames, 2), "all_reduce <- train.py:57 step <- ...");
  EXPECT_EQ(MainThread({}), nullptr);
}

TEST(StackReportTest, AWarmRanksTemplateFramesAreNotItsOwn) {
  // launch/warm_source.h: the template's frames and its loader's, below the script's.
  std::vector<ThreadStack> threads = ParseFaulthandler(
      "Current thread 0x1 (most recent call first):\n"
      "  File \"/w/train.py\", line 57 in step\n"
      "  File \"/w/train.py\", line 80 in <module>\n"
      "  File \"<muster warm template>\", line 232 in _run_main\n"
      "  File \"<muster warm template>\", line 267 in <module>\n"
      "  File \"<string>\", line 1 in <module>\n"
      "\n"
      "Thread 0x2 (most recent call first):\n"
      "  File \"/usr/lib/python3.11/threading.py\", line 320 in wait\n");
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(OneLine(threads[0].frames), "step <- train.py:80 <module>");
  EXPECT_EQ(MainThread(threads), &threads[0]);
  EXPECT_EQ(threads[1].frames.size(), 1u);
}

TEST(StackReportTest, RankRanges) {
  EXPECT_EQ(RankRanges({8, 0, 1, 2, 3, 4, 5, 6, 10, 11, 13}), "0-6,8,10-11,13");
  EXPECT_EQ(RankRanges({7}), "7");
  EXPECT_EQ(RankRanges({}), "");
}

TEST(StackReportTest, GroupsIdenticalStacksAndNamesTheOddOne) {
  std::vector<rdzv::NodeStacks> nodes = {
      {.node_id = "a",
       .host = "node-0",
       .group_rank = 0,
       .ranks = {{.rank = 0, .text = kAllReduce}, {.rank = 1, .text = kAllReduce}}},
      {.node_id = "b",
       .host = "node-1",
       .group_rank = 1,
       .ranks = {{.rank = 2, .text = kAllReduce},
                 {.rank = 3, .text = Stuck(12)},
                 {.rank = 4, .pid = 9, .unavailable = "no stack hook in pid 9"}}},
      {.node_id = "c", .host = "node-2", .group_rank = 2, .unavailable = "did not answer"},
  };
  std::vector<StackGroup> groups = GroupStacks(nodes);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_EQ(groups[0].ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(groups[1].ranks, (std::vector<int>{3}));
  EXPECT_EQ(groups[2].unavailable, "no stack hook in pid 9");
  std::string text = RenderStacks(nodes);
  EXPECT_NE(text.find("ranks 0-2: all_reduce <- train.py:57 step <- train.py:80 <module>\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rank 3: stuck_here <- train.py:80 <module>\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 4: not available: no stack hook in pid 9\n"), std::string::npos);
  EXPECT_NE(text.find("node node-2 (group rank 2): not available: did not answer\n"),
            std::string::npos);
  // Another line of the same function is another stack.
  nodes[1].ranks[2] = {.rank = 4, .text = Stuck(13)};
  EXPECT_EQ(GroupStacks(nodes).size(), 3u);
  nlohmann::json j = StacksJson(nodes);
  EXPECT_EQ(j["groups"][0]["ranks"], nlohmann::json({0, 1, 2}));
  EXPECT_EQ(j["nodes"][1]["ranks"][1]["threads"][0]["frames"][0]["function"], "stuck_here");
}

TEST(StackHookTest, PutsTheHookFirstOnPythonPathAndKeepsTheEnvironmentSorted) {
  std::vector<std::string> env = {"A=1", "PYTHONPATH=/user/lib", "Z=2"};
  AddStackHookEnv("/run", "/run/attempt_0/1", &env);
  EXPECT_EQ(env, (std::vector<std::string>{"A=1", "MUSTER_STACKS_DIR=/run/attempt_0/1",
                                           "MUSTER_STACKS_SIGNAL=" + std::to_string(StackSignal()),
                                           "PYTHONPATH=/run/python:/user/lib", "Z=2"}));
  env = {"A=1"};
  AddStackHookEnv("/run", "/w", &env);
  EXPECT_EQ(env[3], "PYTHONPATH=/run/python");
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
}

}  // namespace
}  // namespace muster

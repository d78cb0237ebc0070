#include "nccl_probe/options.h"

#include <map>

#include "gtest/gtest.h"

namespace muster::probe {
namespace {

absl::StatusOr<ProbeOptions> Parse(std::vector<std::string> args,
                                   std::map<std::string, std::string> env = {}) {
  return ParseProbeArgs(args, [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ProbeOptionsTest, Defaults) {
  auto o = Parse({});
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->command, Command::kInventory);
  EXPECT_EQ(o->libcuda, "libcuda.so.1");
  EXPECT_EQ(o->libnvml, "libnvidia-ml.so.1");
  EXPECT_EQ(o->libnccl, "libnccl.so.2");
  EXPECT_EQ(o->timeout, absl::Seconds(30));
  EXPECT_EQ(o->max_bytes, 1ULL << 30);
  EXPECT_EQ(o->min_nccl_version.ToString(), "2.17.1");
  EXPECT_FALSE(o->min_busbw_gbps.has_value());
}

TEST(ProbeOptionsTest, FlagsBeatEnvironment) {
  auto o = Parse({"nccl", "--libcuda=/x/libcuda.so.1", "--json", "--min_busbw", "350.5",
                  "--check-from", "256M", "--timeout", "5s", "--max-bytes=64M"},
                 {{"MUSTER_LIBCUDA", "/env/cuda"}, {"MUSTER_LIBNCCL", "/env/nccl"}});
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->command, Command::kNccl);
  EXPECT_TRUE(o->json);
  EXPECT_EQ(o->libcuda, "/x/libcuda.so.1");
  EXPECT_EQ(o->libnccl, "/env/nccl");
  EXPECT_DOUBLE_EQ(*o->min_busbw_gbps, 350.5);
  EXPECT_EQ(*o->check_from_bytes, 256ULL << 20);
  EXPECT_EQ(o->timeout, absl::Seconds(5));
  EXPECT_EQ(o->max_bytes, 64ULL << 20);
}

TEST(ProbeOptionsTest, RejectsBadInput) {
  EXPECT_FALSE(Parse({"bogus"}).ok());
  EXPECT_FALSE(Parse({"--nope"}).ok());
  EXPECT_FALSE(Parse({"--timeout"}).ok());
  EXPECT_FALSE(Parse({"--timeout", "0s"}).ok());
  EXPECT_FALSE(Parse({"--min-busbw", "fast"}).ok());
  EXPECT_FALSE(Parse({"--iters", "0"}).ok());
  EXPECT_FALSE(Parse({"--min-bytes", "2G"}).ok());
  EXPECT_FALSE(Parse({"--json=1"}).ok());
  EXPECT_FALSE(Parse({"inventory", "nccl"}).ok());
  EXPECT_FALSE(Parse({"--min-nccl-version", "x"}).ok());
}

}  // namespace
}  // namespace muster::probe

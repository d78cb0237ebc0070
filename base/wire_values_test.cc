#include "base/wire_values.h"

#include <string>

#include "gtest/gtest.h"

namespace muster {
namespace {

TEST(WireValuesTest, Utf8) {
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("job-7"));
  EXPECT_TRUE(IsValidUtf8("r\xC3\xA9sum\xC3\xA9"));     // résumé
  EXPECT_TRUE(IsValidUtf8("\xF0\x9F\x9A\x80"));         // U+1F680
  EXPECT_FALSE(IsValidUtf8("\xFF"));                    // never in UTF-8
  EXPECT_FALSE(IsValidUtf8("abc\xC3"));                 // cut short
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));                // overlong '/'
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));            // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));        // past U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\x80"));                    // a lone continuation byte
  EXPECT_FALSE(IsValidUtf8("latin1 caf\xE9 au lait"));  // Latin-1, not UTF-8
}

TEST(WireValuesTest, RunId) {
  EXPECT_TRUE(CheckRunId("--rdzv-id", "job7").ok());
  EXPECT_TRUE(CheckRunId("--rdzv-id", "0b8e6a9c-5a1f-4c8e-9d11-3f1f2e4a5b6c").ok());
  EXPECT_TRUE(CheckRunId("--rdzv-id", "\xC3\xA9t\xC3\xA9").ok());  // UTF-8 is fine
  for (std::string bad : {std::string("caf\xE9"), std::string("a\nb"), std::string("a\x7F"),
                          std::string("x\xC2\x85y"), std::string(""), std::string("a/b"),
                          std::string(kMaxRunIdBytes + 1, 'x')}) {
    absl::Status st = CheckRunId("PET_RDZV_ID", bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
    std::string message(st.message());
    EXPECT_EQ(message.rfind("PET_RDZV_ID: ", 0), 0u) << message;
    EXPECT_TRUE(IsValidUtf8(message)) << "the error shows the bad bytes escaped";
  }
  EXPECT_TRUE(CheckRunId("--rdzv-id", std::string(kMaxRunIdBytes, 'x')).ok());
  EXPECT_NE(std::string(CheckRunId("--rdzv-id", "caf\xE9").message()).find("caf\\xE9"),
            std::string::npos);
}

TEST(WireValuesTest, HostOrAddress) {
  for (const char* good : {"node-0", "job-m.ns.svc.cluster.local", "10.0.0.7", "::1",
                           "fe80::1%eth0", "host_with_underscore"}) {
    EXPECT_TRUE(CheckHostOrAddress("--local-addr", good).ok()) << good;
  }
  for (std::string bad : {std::string(""), std::string("node 0"),
                          std::string("n\xC3\xB6"
                                      "de"),
                          std::string("h\xFF"), std::string("a/b"), std::string(300, 'a'),
                          std::string("node0:29400"), std::string("1.2.3.4:5")}) {
    absl::Status st = CheckHostOrAddress("POD_IP", bad);
    ASSERT_FALSE(st.ok()) << bad;
    EXPECT_EQ(std::string(st.message()).rfind("POD_IP: ", 0), 0u) << st.message();
  }
}

TEST(WireValuesTest, TokenIsPrintableAsciiAndNeverShown) {
  EXPECT_TRUE(CheckToken("MUSTER_TOKEN", "s3cr3t-TOKEN_value+/=").ok());
  absl::Status st = CheckToken("MUSTER_TOKEN", "s3cr3t\n");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string(st.message()).find("MUSTER_TOKEN"), std::string::npos);
  EXPECT_EQ(std::string(st.message()).find("s3cr3t"), std::string::npos) << st.message();
  EXPECT_FALSE(CheckToken("--token-file", "t\xC3\xB6ken").ok());
}

TEST(WireValuesTest, ToValidUtf8EscapesOnlyTheBadBytes) {
  EXPECT_EQ(ToValidUtf8("exit 1\ntraceback"), "exit 1\ntraceback");
  EXPECT_EQ(ToValidUtf8("caf\xC3\xA9"), "caf\xC3\xA9");
  EXPECT_EQ(ToValidUtf8("cannot execute /tmp/no\xFF"
                        "such"),
            "cannot execute /tmp/no\\xFFsuch");
  EXPECT_EQ(ToValidUtf8("\xC3\xA9\xC3"), "\xC3\xA9\\xC3");
  EXPECT_TRUE(IsValidUtf8(ToValidUtf8("\xF0\x9F\x9A\xED\xA0\x80\x80")));
}

TEST(WireValuesTest, HostnameIsEscapedOnlyWhenNotText) {
  EXPECT_EQ(WireHostname("node-0"), "node-0");
  EXPECT_EQ(WireHostname("n\xC3\xB6"
                         "de"),
            "n\xC3\xB6"
            "de");
  EXPECT_EQ(WireHostname("n\xF6"
                         "de"),
            "n\\xF6de");
  EXPECT_EQ(WireHostname("a\tb"), "a\\x09b");
  EXPECT_TRUE(IsValidUtf8(WireHostname("\xFF\xFE")));
}

}  // namespace
}  // namespace muster

#include "agent/config/config_check.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "agent/lifecycle/test_helpers.h"
#include "gtest/gtest.h"

namespace muster {
namespace {

// Each test runs in a fresh directory of its own (the script check and the interpreter
// check look at the current directory).
class CheckRunConfigTest : public testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = testing::TempDir() + "/config_check_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_NE(getcwd(old_cwd_, sizeof(old_cwd_)), nullptr);
    ASSERT_EQ(chdir(dir_.c_str()), 0);
  }
  void TearDown() override { ASSERT_EQ(chdir(old_cwd_), 0); }

  void Touch(const std::string& name) { std::ofstream(dir_ + "/" + name) << "print('hi')\n"; }

  std::string dir_;
  char old_cwd_[4096] = {};
};

Config Command(std::vector<std::string> command) {
  Config c;
  c.command = std::move(command);
  return c;
}

using testing_helpers::ExpectInvalid;

TEST_F(CheckRunConfigTest, TheScriptMustExist) {
  Config c = Command({"train.py"});
  ExpectInvalid(CheckRunConfig(&c), "training script: 'train.py' not found from the current");
  Touch("train.py");
  EXPECT_TRUE(CheckRunConfig(&c).ok());
  mkdir("dir.py", 0755);
  c.command = {"dir.py"};
  ExpectInvalid(CheckRunConfig(&c), "'dir.py' not found");
  for (auto [module, no_python] : {std::pair{true, false}, std::pair{false, true}}) {
    Config other = Command({"missing.py"});
    other.module = module;
    other.no_python = no_python;
    EXPECT_TRUE(CheckRunConfig(&other).ok()) << "a module or a program is not looked for";
  }
}

// `muster run -- python train.py`: the Pod's command with muster in front runs as given.
TEST_F(CheckRunConfigTest, ACommandThatStartsWithAnInterpreterRunsAsGiven) {
  for (const char* python : {"python", "python3", "python3.11"}) {
    Config c = Command({python, "train.py"});
    ASSERT_TRUE(CheckRunConfig(&c).ok()) << python;
    EXPECT_TRUE(c.no_python) << python;
    EXPECT_EQ(c.sources["no-python"], std::string("the command starts with ") + python);
  }
  // ...unless a script of that name is here, or the interpreter path cannot be executed.
  Touch("python3");
  Config script = Command({"python3"});
  ASSERT_TRUE(CheckRunConfig(&script).ok());
  EXPECT_FALSE(script.no_python);
  Config path = Command({dir_ + "/no/bin/python3", "train.py"});
  ExpectInvalid(CheckRunConfig(&path), "/no/bin/python3' not found");
  EXPECT_FALSE(path.no_python);
  Config named = Command({"pythonic.py"});
  ExpectInvalid(CheckRunConfig(&named), "'pythonic.py' not found");
}

TEST_F(CheckRunConfigTest, TheLogDirIsMadeAndMustBeWritable) {
  Config c = Command({"true"});
  c.no_python = true;
  c.log_dir = dir_ + "/a/b/logs";
  c.sources["log-dir"] = "--log-dir";
  ASSERT_TRUE(CheckRunConfig(&c).ok());
  struct stat st;
  ASSERT_EQ(stat(c.log_dir.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_NE(access((c.log_dir + "/.muster_write_test").c_str(), F_OK), 0) << "probe file left";
  Touch("file");
  c.log_dir = dir_ + "/file/logs";
  ExpectInvalid(CheckRunConfig(&c), "--log-dir: cannot create '" + dir_ + "/file/");
  c.sources["log-dir"] = "MUSTER_LOG_DIR";
  c.log_dir = "/proc/self";
  ExpectInvalid(CheckRunConfig(&c), "MUSTER_LOG_DIR: '/proc/self' is not writable");
}

TEST_F(CheckRunConfigTest, TlsFilesMustBeReadable) {
  Touch("cert.pem");
  Config c = Command({"true"});
  c.no_python = true;
  c.tls_cert = dir_ + "/cert.pem";
  c.tls_ca = dir_ + "/ca.pem";
  c.sources = {{"tls-cert", "--tls-cert"}, {"tls-ca", "MUSTER_TLS_CA"}};
  ExpectInvalid(CheckRunConfig(&c), "MUSTER_TLS_CA: cannot read '" + dir_ + "/ca.pem'");
  c.tls_ca = dir_ + "/cert.pem";
  EXPECT_TRUE(CheckRunConfig(&c).ok());
  c.tls_key = "";
  c.sources["tls-key"] = "--tls-key";  // given, even if empty
  ExpectInvalid(CheckRunConfig(&c), "--tls-key: cannot read ''");
}

}  // namespace
}  // namespace muster

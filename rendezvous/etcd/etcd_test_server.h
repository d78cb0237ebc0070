// EtcdServerTest: a gtest fixture with a real etcd (Debian's etcd-server, one member on
// loopback, data on tmpfs) and an EtcdClient of it; its tests are skipped when /usr/bin/etcd
// is missing (scripts/setup.sh installs it). For the etcd backend's tests only.
#ifndef MUSTER_RENDEZVOUS_ETCD_ETCD_TEST_SERVER_H_
#define MUSTER_RENDEZVOUS_ETCD_ETCD_TEST_SERVER_H_

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "rendezvous/etcd/etcd_client.h"

namespace muster::rdzv::etcd {

inline constexpr char kEtcd[] = "/usr/bin/etcd";

// A port free now on 127.0.0.1 (the kernel's pick).
inline int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

class EtcdServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (access(kEtcd, X_OK) != 0) GTEST_SKIP() << kEtcd << " missing (scripts/setup.sh)";
    char dir[] = "/dev/shm/muster-etcd-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    client_port_ = FreeLoopbackPort();
    const int peer = FreeLoopbackPort();
    ASSERT_GT(client_port_, 0);
    ASSERT_GT(peer, 0);
    const std::string client = absl::StrCat("http://127.0.0.1:", client_port_);
    const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer);
    std::vector<std::string> args = {kEtcd,
                                     "--data-dir",
                                     dir_ + "/data",
                                     "--listen-client-urls",
                                     client,
                                     "--advertise-client-urls",
                                     client,
                                     "--listen-peer-urls",
                                     peer_url,
                                     "--initial-advertise-peer-urls",
                                     peer_url,
                                     "--initial-cluster",
                                     "default=" + peer_url,
                                     "--logger",
                                     "zap",
                                     "--log-outputs",
                                     dir_ + "/etcd.log"};
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(kEtcd, argv.data());
      _exit(127);
    }
    // The client is made once etcd listens: gRPC backs off from a refused connection for
    // seconds, which is not what this test measures.
    absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!Listening()) {
      ASSERT_LT(absl::Now(), deadline) << "etcd does not listen; see " << dir_ << "/etcd.log";
      ASSERT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "etcd exited; see " << dir_ << "/etcd.log";
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto etcd = EtcdClient::Create({.endpoints = {Endpoint()}});
    ASSERT_TRUE(etcd.ok()) << etcd.status();
    etcd_ = *std::move(etcd);
    // Ready once it answers (a one-member cluster elects itself within about a second).
    while (!etcd_->Put("/ready", "1").ok()) {
      ASSERT_LT(absl::Now(), deadline) << "etcd did not start; see " << dir_ << "/etcd.log";
      ASSERT_EQ(waitpid(pid_, nullptr, WNOHANG), 0) << "etcd exited; see " << dir_ << "/etcd.log";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  void TearDown() override {
    etcd_.reset();
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  bool Listening() const {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(client_port_);
    bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    if (fd >= 0) close(fd);
    return ok;
  }

  std::string Endpoint() const { return absl::StrCat("127.0.0.1:", client_port_); }

  std::string dir_;
  int client_port_ = 0;
  pid_t pid_ = -1;
  std::unique_ptr<EtcdClient> etcd_;
};

}  // namespace muster::rdzv::etcd

#endif  // MUSTER_RENDEZVOUS_ETCD_ETCD_TEST_SERVER_H_

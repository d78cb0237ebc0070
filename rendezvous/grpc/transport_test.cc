// The server's transport features: grpc.health.v1 and TLS.
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdlib>
#include <fstream>
#include <future>
#include <string>

#include "gtest/gtest.h"
#include "rendezvous/grpc/server.h"
#include "rendezvous/grpc/test_agent.h"

namespace muster::rdzv {
namespace {

RendezvousServer::Options Listen(const std::string& address) {
  RendezvousServer::Options options;
  options.listen_address = address;
  return options;
}

TEST(TransportTest, ServesGrpcHealth) {
  auto server = RendezvousServer::Start(Listen("127.0.0.1:0")).value();
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Slice nothing(std::string{});  // HealthCheckRequest{service: ""} encodes to nothing
  grpc::ByteBuffer request(&nothing, 1);
  grpc::ByteBuffer response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) { done.set_value(s); });
  grpc::Status status = done.get_future().get();
  ASSERT_TRUE(status.ok()) << status.error_message();
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(response.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices)
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  EXPECT_EQ(bytes, std::string("\x08\x01", 2));  // status: SERVING
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/muster_tls_" + std::to_string(getpid());
    std::string cmd = "mkdir -p " + dir_ +
                      " && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
                      " -addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout " +
                      dir_ + "/key.pem -out " + dir_ + "/cert.pem >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "openssl could not make a certificate";
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
};

TEST_F(TlsTest, AgentJoinsOverTlsAndPlaintextCannot) {
  RendezvousServer::Options options;
  options.listen_address = "127.0.0.1:0";
  options.tls_cert_file = dir_ + "/cert.pem";
  options.tls_key_file = dir_ + "/key.pem";
  auto server = RendezvousServer::Start(options).value();
  JobSpec spec;
  spec.run_id = "tls";

  GrpcRendezvousClient::Options secure;
  secure.endpoint = {.host = "localhost", .port = server->port()};
  secure.tls_ca_file = dir_ + "/cert.pem";
  TestAgent good(secure);
  good.Start(TestNode("n0", 1000), spec);
  EXPECT_TRUE(good.WaitEvent(Event::Kind::kRoundStarted).has_value());

  GrpcRendezvousClient::Options plain;
  plain.endpoint = secure.endpoint;
  plain.join_timeout = absl::Milliseconds(800);
  TestAgent bad(plain);
  bad.Start(TestNode("n1", 1001), spec);
  std::optional<absl::Status> error = bad.WaitError();
  ASSERT_TRUE(error.has_value());
  EXPECT_TRUE(absl::IsUnavailable(*error)) << *error;
}

TEST(TlsOptionsTest, UnreadableFilesFailStart) {
  RendezvousServer::Options options;
  options.tls_cert_file = "/nonexistent/cert.pem";
  options.tls_key_file = "/nonexistent/key.pem";
  EXPECT_TRUE(absl::IsInvalidArgument(RendezvousServer::Start(options).status()));
  GrpcRendezvousClient::Options client;
  client.endpoint = {.host = "h", .port = 1};
  client.tls_ca_file = "/nonexistent/ca.pem";
  EXPECT_TRUE(absl::IsInvalidArgument(GrpcRendezvousClient::Create(client).status()));
}

TEST(ServerOptionsTest, PortInUseIsUnavailable) {
  auto first = RendezvousServer::Start(Listen("127.0.0.1:0")).value();
  auto second = RendezvousServer::Start(Listen("127.0.0.1:" + std::to_string(first->port())));
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
}

}  // namespace
}  // namespace muster::rdzv

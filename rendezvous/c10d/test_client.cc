#include "rendezvous/c10d/test_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "absl/status/status.h"
#include "base/errno_status.h"
#include "base/status_macros.h"

namespace muster::c10d {

RequestBytes::RequestBytes(Protocol protocol, Op op) {
  AppendU8(&bytes_, EncodeOpcode(protocol, op).value());
}
RequestBytes& RequestBytes::Str(std::string_view s) {
  AppendString(&bytes_, s);
  return *this;
}
RequestBytes& RequestBytes::U32(uint32_t v) {
  AppendU32(&bytes_, v);
  return *this;
}
RequestBytes& RequestBytes::U64(uint64_t v) {
  AppendU64(&bytes_, v);
  return *this;
}
RequestBytes& RequestBytes::Keys(const std::vector<std::string>& keys) {
  AppendU64(&bytes_, keys.size());
  for (const std::string& k : keys) AppendString(&bytes_, k);
  return *this;
}

absl::StatusOr<TestClient> TestClient::Connect(uint16_t port, Protocol protocol) {
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket", errno);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return ErrnoStatus("connect", errno);
  }
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  TestClient client(std::move(fd), protocol);
  if (protocol == Protocol::kModern) {
    RETURN_IF_ERROR(client.Send(RequestBytes(protocol, Op::kValidate).U32(kValidationMagic)));
  }
  return client;
}

absl::Status TestClient::SendRaw(std::string_view bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd_.get(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("send", errno);
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> TestClient::Read(size_t n, absl::Duration timeout) {
  std::string out(n, '\0');
  size_t done = 0;
  absl::Time deadline = absl::Now() + timeout;
  while (done < n) {
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    if (ms < 0) return absl::DeadlineExceededError("no reply from the store");
    pollfd p{fd_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus("poll", errno);
    if (r == 0) return absl::DeadlineExceededError("no reply from the store");
    ssize_t got = ::recv(fd_.get(), out.data() + done, n - done, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return ErrnoStatus("recv", errno);
    if (got == 0) return absl::UnavailableError("store closed the connection");
    done += static_cast<size_t>(got);
  }
  return out;
}

absl::StatusOr<uint8_t> TestClient::ReadU8(absl::Duration timeout) {
  ASSIGN_OR_RETURN(std::string b, Read(1, timeout));
  return static_cast<uint8_t>(b[0]);
}
absl::StatusOr<int64_t> TestClient::ReadI64() {
  ASSIGN_OR_RETURN(std::string b, Read(8));
  return static_cast<int64_t>(LoadU64(b.data()));
}
absl::StatusOr<std::string> TestClient::ReadString() {
  ASSIGN_OR_RETURN(int64_t len, ReadI64());
  if (len < 0 || len > (1 << 28)) return absl::InternalError("absurd string length");
  return Read(static_cast<size_t>(len));
}

bool TestClient::ClosedWithin(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  char buf[4096];
  while (absl::Now() < deadline) {
    int ms = static_cast<int>(absl::ToInt64Milliseconds(deadline - absl::Now()));
    pollfd p{fd_.get(), POLLIN, 0};
    int r = ::poll(&p, 1, ms < 1 ? 1 : ms);
    if (r <= 0) continue;
    ssize_t got = ::recv(fd_.get(), buf, sizeof(buf), 0);
    if (got == 0 || (got < 0 && errno != EINTR && errno != EAGAIN)) return true;
  }
  return false;
}

bool TestClient::SilentFor(absl::Duration timeout) {
  pollfd p{fd_.get(), POLLIN, 0};
  return ::poll(&p, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout))) == 0;
}

absl::Status TestClient::Set(std::string_view key, std::string_view value) {
  return Send(Request(Op::kSet).Str(key).Str(value));
}
absl::StatusOr<std::string> TestClient::Get(std::string_view key) {
  RETURN_IF_ERROR(Send(Request(Op::kGet).Str(key)));
  return ReadString();
}
absl::StatusOr<int64_t> TestClient::Add(std::string_view key, int64_t delta) {
  RETURN_IF_ERROR(Send(Request(Op::kAdd).Str(key).I64(delta)));
  return ReadI64();
}
absl::StatusOr<std::string> TestClient::CompareSet(std::string_view key, std::string_view expected,
                                                   std::string_view desired) {
  RETURN_IF_ERROR(Send(Request(Op::kCompareSet).Str(key).Str(expected).Str(desired)));
  return ReadString();
}
absl::StatusOr<uint8_t> TestClient::Check(const std::vector<std::string>& keys) {
  RETURN_IF_ERROR(Send(Request(Op::kCheck).Keys(keys)));
  return ReadU8();
}
absl::Status TestClient::SendWait(const std::vector<std::string>& keys) {
  return Send(Request(Op::kWait).Keys(keys));
}
absl::StatusOr<int64_t> TestClient::NumKeys() {
  RETURN_IF_ERROR(Send(Request(Op::kGetNumKeys)));
  return ReadI64();
}
absl::StatusOr<int64_t> TestClient::DeleteKey(std::string_view key) {
  RETURN_IF_ERROR(Send(Request(Op::kDeleteKey).Str(key)));
  return ReadI64();
}
absl::Status TestClient::Append(std::string_view key, std::string_view value) {
  return Send(Request(Op::kAppend).Str(key).Str(value));
}
absl::StatusOr<std::vector<std::string>> TestClient::MultiGet(
    const std::vector<std::string>& keys) {
  RETURN_IF_ERROR(Send(Request(Op::kMultiGet).Keys(keys)));
  std::vector<std::string> out;
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSIGN_OR_RETURN(std::string v, ReadString());
    out.push_back(std::move(v));
  }
  return out;
}
absl::Status TestClient::MultiSet(const std::vector<std::pair<std::string, std::string>>& kvs) {
  RequestBytes r = Request(Op::kMultiSet);
  r.U64(kvs.size());
  for (const auto& [k, v] : kvs) r.Str(k).Str(v);
  return Send(r);
}

}  // namespace muster::c10d

// libFuzzer target for the store's request decoder and state machine: the input
// is a script of byte chunks arriving on up to four connections (chunk header:
// connection index, chunk length), decoded incrementally and executed exactly
// as StoreLoop does. Build: cmake -DCMAKE_CXX_COMPILER=clang++
// -DMUSTER_FUZZ=ON; run: store_protocol_fuzz.
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "rendezvous/c10d/request_parser.h"
#include "rendezvous/c10d/store_state.h"
#include "rendezvous/c10d/wire.h"

namespace {

using muster::c10d::ConnectionId;

class CountingOutbox : public muster::c10d::Outbox {
 public:
  void Send(ConnectionId, std::span<const std::string_view> parts) override {
    for (std::string_view part : parts) sent += part.size();
  }
  size_t sent = 0;
};

struct FuzzConnection {
  muster::c10d::Protocol protocol = muster::c10d::Protocol::kUnknown;
  std::string input;
};

// Mirrors Connection::ProcessInput without sockets. False: the connection is
// closed.
bool Feed(FuzzConnection& conn, ConnectionId id, const muster::c10d::Limits& limits,
          muster::c10d::StoreState& state) {
  muster::c10d::Request request;
  size_t pos = 0;
  while (pos < conn.input.size()) {
    std::string_view rest(conn.input.data() + pos, conn.input.size() - pos);
    if (conn.protocol == muster::c10d::Protocol::kUnknown) {
      muster::c10d::Detection d = muster::c10d::DetectProtocol(rest);
      if (d.protocol == muster::c10d::Protocol::kUnknown) break;
      conn.protocol = d.protocol;
      pos += d.consumed;
      continue;
    }
    auto outcome = muster::c10d::ParseRequest(conn.protocol, rest, limits, &request);
    if (!outcome.ok()) return false;
    if (!outcome->complete) {
      if (outcome->size <= rest.size()) __builtin_trap();  // the need must grow
      break;
    }
    if (outcome->size == 0 || outcome->size > rest.size()) __builtin_trap();
    pos += outcome->size;
    if (!state.Execute(id, request).ok()) return false;
  }
  conn.input.erase(0, pos);
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  muster::c10d::Limits limits;
  limits.max_key_bytes = 256;
  limits.max_value_bytes = 4096;
  limits.max_keys_per_request = 64;
  limits.max_request_bytes = 1 << 16;
  CountingOutbox outbox;
  muster::c10d::StoreState state(&outbox);
  std::array<FuzzConnection, 4> conns;
  std::array<ConnectionId, 4> ids = {2, 3, 4, 5};
  ConnectionId next_id = 6;
  size_t i = 0;
  while (i + 2 <= size) {
    size_t index = data[i] % conns.size();
    size_t len = std::min<size_t>(data[i + 1], size - i - 2);
    conns[index].input.append(reinterpret_cast<const char*>(data + i + 2), len);
    i += 2 + len;
    if (!Feed(conns[index], ids[index], limits, state)) {
      state.DropConnection(ids[index]);  // a fresh peer takes the slot
      conns[index] = FuzzConnection();
      ids[index] = next_id++;
    }
  }
  return 0;
}

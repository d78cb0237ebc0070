#include "rendezvous/shared_port/first_bytes.h"

namespace muster::shared_port {

Protocol ClassifyFirstBytes(std::string_view received) {
  if (received.size() >= kHttp2Preface.size()) {
    return received.substr(0, kHttp2Preface.size()) == kHttp2Preface ? Protocol::kHttp2
                                                                     : Protocol::kStore;
  }
  if (received.empty()) return Protocol::kUndecided;
  return kHttp2Preface.substr(0, received.size()) == received ? Protocol::kUndecided
                                                              : Protocol::kStore;
}

Protocol ClassifyAtDeadline(std::string_view received) {
  if (received.empty()) return Protocol::kStore;
  return ClassifyFirstBytes(received);
}

const char* ProtocolName(Protocol p) {
  switch (p) {
    case Protocol::kUndecided:
      return "undecided";
    case Protocol::kHttp2:
      return "HTTP/2";
    case Protocol::kStore:
      return "c10d store";
  }
  return "unknown";
}

}  // namespace muster::shared_port

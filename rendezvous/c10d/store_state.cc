#include "rendezvous/c10d/store_state.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace muster::c10d {
namespace {

std::string Byte(uint8_t v) { return std::string(1, static_cast<char>(v)); }

std::string EncodedI64(int64_t v) {
  std::string out;
  AppendI64(&out, v);
  return out;
}

// One reply as a list of pieces for Outbox::Send: fixed-size fields (lengths,
// counts, type bytes) are encoded into `fields_`, values are referenced where
// they are stored, so even a reply that is refused costs nothing like its size.
class ReplyParts {
 public:
  void U8(uint8_t v) {
    AppendU8(&fields_, v);
    AddField(1);
  }
  void I64(int64_t v) {
    AppendI64(&fields_, v);
    AddField(8);
  }
  void String(std::string_view s) {
    I64(static_cast<int64_t>(s.size()));
    if (!s.empty()) pieces_.push_back({s.data(), s.size()});
  }
  // Views into `fields_` are made here, once it no longer grows. Valid until the
  // stored values change.
  std::span<const std::string_view> Parts() {
    parts_.clear();
    parts_.reserve(pieces_.size());
    size_t field = 0;
    for (const Piece& piece : pieces_) {
      if (piece.data != nullptr) {
        parts_.emplace_back(piece.data, piece.size);
      } else {
        parts_.emplace_back(fields_.data() + field, piece.size);
        field += piece.size;
      }
    }
    return parts_;
  }

 private:
  struct Piece {
    const char* data;  // nullptr: the next `size` bytes of fields_
    size_t size;
  };
  void AddField(size_t n) {
    if (!pieces_.empty() && pieces_.back().data == nullptr) {
      pieces_.back().size += n;
    } else {
      pieces_.push_back({nullptr, n});
    }
  }

  std::string fields_;
  std::vector<Piece> pieces_;
  std::vector<std::string_view> parts_;
};

}  // namespace

absl::StatusOr<int64_t> ParseCounter(const std::string& text) {
  const char* begin = text.c_str();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(begin, &end, 10);
  if (end == begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter value is not a number: '", text.substr(0, 32), "'"));
  }
  if (errno == ERANGE) {
    return absl::InvalidArgumentError("counter value out of int64 range");
  }
  return static_cast<int64_t>(v);
}

int64_t StoreState::Growth(const std::string& key, size_t size) const {
  auto it = values_.find(key);
  if (it == values_.end()) return static_cast<int64_t>(key.size() + size);
  return static_cast<int64_t>(size) - static_cast<int64_t>(it->second.size());
}

absl::Status StoreState::CheckRoom(const Request& request) const {
  int64_t growth = 0;
  switch (request.op) {
    case Op::kSet:
      growth = Growth(request.keys[0], request.values[0].size());
      break;
    case Op::kMultiSet:
      for (size_t i = 0; i < request.keys.size(); ++i) {
        growth += std::max<int64_t>(0, Growth(request.keys[i], request.values[i].size()));
      }
      break;
    case Op::kAppend:
      growth = static_cast<int64_t>(request.values[0].size()) +
               (values_.contains(request.keys[0]) ? 0 : request.keys[0].size());
      break;
    case Op::kCompareSet:
      growth = Growth(request.keys[0], request.values[1].size());
      break;
    case Op::kAdd:
    case Op::kBarrier:
      growth = Growth(request.keys[0], 20);  // an int64 in decimal at most
      break;
    case Op::kQueuePush:
      growth = static_cast<int64_t>(request.values[0].size()) +
               (queues_.contains(request.keys[0]) ? 0 : request.keys[0].size());
      break;
    default:
      return absl::OkStatus();  // stores nothing
  }
  if (growth <= 0 || bytes_ + static_cast<uint64_t>(growth) <= max_bytes_) {
    return absl::OkStatus();
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "the store is full: it holds ", bytes_, " bytes of keys and values and this ",
      OpName(request.op), " of key '", request.keys[0].substr(0, 64), "' would add ", growth,
      ", past the limit of ", max_bytes_,
      " bytes (--store-max-bytes); the client is disconnected. Store less (large objects "
      "belong in files or collectives, not the c10d store) or raise --store-max-bytes"));
}

absl::Status StoreState::Execute(ConnectionId conn, Request& request) {
  if (max_bytes_ != UINT64_MAX) RETURN_IF_ERROR(CheckRoom(request));
  switch (request.op) {
    case Op::kValidate:
      return absl::InvalidArgumentError("VALIDATE is only valid as the first request");
    case Op::kSet:
      StoreValue(request.keys[0], std::move(request.values[0]));
      return absl::OkStatus();
    case Op::kMultiSet:
      for (size_t i = 0; i < request.keys.size(); ++i) {
        StoreValue(request.keys[i], std::move(request.values[i]));
      }
      return absl::OkStatus();
    case Op::kAppend:
      Append(request);
      return absl::OkStatus();
    case Op::kCompareSet:
      CompareSet(conn, request);
      return absl::OkStatus();
    case Op::kGet:
      ReplyString(conn, ValueOrEmpty(request.keys[0]));
      return absl::OkStatus();
    case Op::kMultiGet:
      MultiGet(conn, request);
      return absl::OkStatus();
    case Op::kAdd:
      return Add(conn, request);
    case Op::kCheck: {
      bool ready = std::all_of(request.keys.begin(), request.keys.end(),
                               [this](const std::string& k) { return Present(k); });
      Reply(conn, Byte(ready ? kCheckReady : kCheckNotReady));
      return absl::OkStatus();
    }
    case Op::kWait:
      Wait(conn, request);
      return absl::OkStatus();
    case Op::kGetNumKeys:
      Reply(conn, EncodedI64(static_cast<int64_t>(values_.size())));
      return absl::OkStatus();
    case Op::kDeleteKey:
      DeleteKey(conn, request.keys[0]);
      return absl::OkStatus();
    case Op::kWatchKey:
      watchers_[request.keys[0]].push_back(conn);
      watched_keys_[conn].push_back(request.keys[0]);
      Reply(conn, Byte(kWatchCallbackRegistered));
      return absl::OkStatus();
    case Op::kCancelWait:
      // Any STOP_WAITING already queued for `conn` stays ahead of this byte.
      ClearWaits(conn);
      Reply(conn, Byte(kWaitCanceled));
      return absl::OkStatus();
    case Op::kPing: {
      std::string out;
      AppendU32(&out, request.nonce);
      Reply(conn, out);
      return absl::OkStatus();
    }
    case Op::kQueuePush: {
      const std::string& key = request.keys[0];
      auto [queue, created] = queues_.try_emplace(key);
      bytes_ += (created ? key.size() : 0) + request.values[0].size();
      queue->second.push_back(std::move(request.values[0]));
      WakeOne(key);
      return absl::OkStatus();
    }
    case Op::kQueuePop:
      QueuePop(conn, request.keys[0]);
      return absl::OkStatus();
    case Op::kQueueLen: {
      auto it = queues_.find(request.keys[0]);
      Reply(conn, EncodedI64(it == queues_.end() ? 0 : it->second.size()));
      return absl::OkStatus();
    }
    case Op::kListKeys:
      ListKeys(conn);
      return absl::OkStatus();
    case Op::kBarrier:
      return Barrier(conn, request);
  }
  return absl::InternalError("unhandled op");
}

void StoreState::ReplyString(ConnectionId conn, std::string_view value) {
  ReplyParts reply;
  reply.String(value);
  outbox_->Send(conn, reply.Parts());
}

std::string_view StoreState::ValueOrEmpty(const std::string& key) const {
  // Union semantics: a missing key reads as empty (libuv) instead of closing
  // (classic).
  auto it = values_.find(key);
  return it == values_.end() ? std::string_view() : std::string_view(it->second);
}

void StoreState::MultiGet(ConnectionId conn, const Request& request) {
  // Naming one large key many times asks for many times its size: the reply
  // goes out as views of the stored values, so the outbox can refuse it from its
  // size before a byte of it is copied.
  ReplyParts reply;
  for (const std::string& key : request.keys) reply.String(ValueOrEmpty(key));
  outbox_->Send(conn, reply.Parts());
}

void StoreState::Append(Request& request) {
  const std::string& key = request.keys[0];
  auto it = values_.find(key);
  if (it == values_.end()) {
    StoreValue(key, std::move(request.values[0]));
    return;
  }
  // In place: std::string grows its capacity geometrically, so appending costs
  // the appended bytes (amortised), not a copy of the whole value. The old value
  // a watcher is told about is the prefix that was there before.
  std::string& value = it->second;
  size_t old_size = value.size();
  value.append(request.values[0]);
  bytes_ += request.values[0].size();
  WakeAll(key);
  std::string_view now(value);
  NotifyWatchers(key, kWatchKeyAppended, now.substr(0, old_size), now);
}

void StoreState::DeleteKey(ConnectionId conn, const std::string& key) {
  auto it = values_.find(key);
  int64_t erased = 0;
  if (it != values_.end()) {
    std::string old = std::move(it->second);
    bytes_ -= key.size() + old.size();
    values_.erase(it);
    erased = 1;
    NotifyWatchers(key, kWatchKeyDeleted, old, "");
  }
  Reply(conn, EncodedI64(erased));  // waiters are not woken, as in torch
}

bool StoreState::Present(const std::string& key) const {
  if (values_.contains(key)) return true;
  auto it = queues_.find(key);  // libuv: a non-empty queue satisfies CHECK/WAIT
  return it != queues_.end() && !it->second.empty();
}

void StoreState::StoreValue(const std::string& key, std::string value) {
  auto [it, created] = values_.try_emplace(key);
  std::string old;
  if (!created) old = std::move(it->second);
  bytes_ += (created ? key.size() : 0) + value.size();
  bytes_ -= old.size();
  it->second = std::move(value);
  WakeAll(key);
  NotifyWatchers(key, created ? kWatchKeyCreated : kWatchKeyUpdated, old, it->second);
}

void StoreState::CompareSet(ConnectionId conn, Request& request) {
  const std::string& key = request.keys[0];
  std::string& expected = request.values[0];
  std::string& desired = request.values[1];
  auto it = values_.find(key);
  if (it == values_.end()) {
    if (!expected.empty()) {
      ReplyString(conn, expected);  // torch's documented "lie": not set
      return;
    }
    ReplyString(conn, desired);
    StoreValue(key, std::move(desired));  // libuv wakes waiters; so do we
    return;
  }
  if (it->second == expected) {
    ReplyString(conn, desired);
    StoreValue(key, std::move(desired));
    return;
  }
  ReplyString(conn, it->second);
}

absl::Status StoreState::Add(ConnectionId conn, Request& request) {
  const std::string& key = request.keys[0];
  int64_t current = 0;
  auto it = values_.find(key);
  if (it != values_.end()) {
    ASSIGN_OR_RETURN(current, ParseCounter(it->second));
  }
  // Wrap like two's complement instead of undefined signed overflow.
  int64_t sum =
      static_cast<int64_t>(static_cast<uint64_t>(current) + static_cast<uint64_t>(request.number));
  Reply(conn, EncodedI64(sum));
  StoreValue(key, std::to_string(sum));
  return absl::OkStatus();
}

void StoreState::Wait(ConnectionId conn, Request& request) {
  std::vector<std::string> missing;
  for (std::string& key : request.keys) {
    if (!Present(key)) missing.push_back(std::move(key));
  }
  if (missing.empty()) {
    Reply(conn, Byte(kStopWaiting));
    return;
  }
  Register(conn, std::move(missing));
}

void StoreState::Register(ConnectionId conn, std::vector<std::string> missing) {
  // torch overwrites keysAwaited_ and keeps older registrations (a 1.13 client
  // that timed out never cancels); we reproduce that so the bytes on the wire
  // match torch's.
  WaitState& state = waits_[conn];
  state.remaining = static_cast<int64_t>(missing.size());
  for (std::string& key : missing) {
    waiters_[key].push_back(conn);
    state.keys.push_back(std::move(key));
  }
}

void StoreState::CountDown(ConnectionId conn) {
  auto it = waits_.find(conn);
  if (it == waits_.end()) return;
  if (--it->second.remaining == 0) Reply(conn, Byte(kStopWaiting));
}

void StoreState::WakeAll(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  std::vector<ConnectionId> conns = std::move(it->second);
  waiters_.erase(it);
  for (ConnectionId conn : conns) CountDown(conn);
}

void StoreState::WakeOne(const std::string& key) {
  auto it = waiters_.find(key);
  if (it == waiters_.end()) return;
  ConnectionId conn = it->second.front();
  it->second.erase(it->second.begin());
  if (it->second.empty()) waiters_.erase(it);
  CountDown(conn);
}

void StoreState::ClearWaits(ConnectionId conn) {
  auto it = waits_.find(conn);
  if (it == waits_.end()) return;
  for (const std::string& key : it->second.keys) {
    auto w = waiters_.find(key);
    if (w == waiters_.end()) continue;
    std::erase(w->second, conn);
    if (w->second.empty()) waiters_.erase(w);
  }
  waits_.erase(it);
}

void StoreState::DropConnection(ConnectionId conn) {
  ClearWaits(conn);
  auto it = watched_keys_.find(conn);
  if (it == watched_keys_.end()) return;
  for (const std::string& key : it->second) {
    auto w = watchers_.find(key);
    if (w == watchers_.end()) continue;
    std::erase(w->second, conn);
    if (w->second.empty()) watchers_.erase(w);
  }
  watched_keys_.erase(it);
}

void StoreState::NotifyWatchers(const std::string& key, uint8_t type, std::string_view old_value,
                                std::string_view new_value) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  ReplyParts notice;
  notice.U8(type);
  notice.String(key);
  notice.String(old_value);
  notice.String(new_value);
  std::span<const std::string_view> parts = notice.Parts();
  for (ConnectionId conn : it->second) outbox_->Send(conn, parts);
}

absl::Status StoreState::Barrier(ConnectionId conn, Request& request) {
  const std::string& key = request.keys[0];
  int64_t count = 0;
  auto it = values_.find(key);
  if (it != values_.end()) {
    ASSIGN_OR_RETURN(count, ParseCounter(it->second));
  }
  ++count;
  std::string counted = std::to_string(count);
  bytes_ += counted.size() + (it == values_.end() ? key.size() : 0);
  bytes_ -= it == values_.end() ? 0 : it->second.size();
  values_[key] = std::move(counted);
  if (count >= request.number) {
    WakeAll(key);
    Reply(conn, Byte(kStopWaiting));
    return absl::OkStatus();
  }
  Register(conn, {key});
  return absl::OkStatus();
}

void StoreState::QueuePop(ConnectionId conn, const std::string& key) {
  auto it = queues_.find(key);
  if (it == queues_.end() || it->second.empty()) {
    Reply(conn, EncodedI64(0));
    return;
  }
  ReplyParts reply;
  reply.I64(static_cast<int64_t>(it->second.size()));
  reply.String(it->second.front());
  outbox_->Send(conn, reply.Parts());  // copied before the value is dropped
  bytes_ -= it->second.front().size();
  it->second.pop_front();
  if (it->second.empty()) {
    bytes_ -= key.size();
    queues_.erase(it);
  }
}

void StoreState::ListKeys(ConnectionId conn) {
  std::vector<const std::string*> keys;
  keys.reserve(values_.size());
  for (const auto& [key, value] : values_) keys.push_back(&key);
  std::sort(keys.begin(), keys.end(),
            [](const std::string* a, const std::string* b) { return *a < *b; });
  ReplyParts reply;
  reply.I64(static_cast<int64_t>(keys.size()));
  for (const std::string* key : keys) reply.String(*key);
  outbox_->Send(conn, reply.Parts());
}

}  // namespace muster::c10d

// rdzv_h2load: M simulated muster agents against a real `muster serve` (B2, reference/perf.md
// §7), speaking gRPC's HTTP/2 framing by hand from one thread with epoll.
//
//   rdzv_h2load PORT M [--host H] [--run-id ID] [--local-world-size L]
//                      [--tcp-keepalive-ms T] [--hold-secs S] [--full-parse] [--node-list]
//                      [--window BYTES] [--timeout-secs D]
//
// Why: rdzv_load.cc (gRPC C++ callback API, one channel per agent) spends more CPU than the
// server during a 4096-agent round (~1.0 s vs ~0.6 s), and on 2 vCPUs the client then
// dominates the measured round. This twin does the minimum an agent's Session stream needs on the
// wire, with the same output contract (one JSON line on stdout with connect_ms, round_ms, leave_ms
// and client_cpu_{connect,round,leave}_s; "phase join/leave start/end" and "hb_window start/end" on
// stderr where rdzv_load prints them), so bench/b2_rendezvous.py can drive either.
//
// Per agent: its own TCP connection, connected before the clock (preface + SETTINGS, up
// when the server's SETTINGS arrived; at most 512 connects in flight so the listen backlog
// is never overrun). Join: one write of HEADERS (stream 1, HPACK literals without indexing
// or Huffman) + DATA with the Join that rdzv_load sends. Then frames are read until
// RoundStarted; the server's HEADERS are skipped undecoded (we never need their values, so
// HPACK's dynamic table does not matter). Leave: DATA with Leave and END_STREAM (as
// WritesDone), done when the server's trailers or RST_STREAM arrive.
//
// RoundStarted lists every node only for an agent that asked (NodeInfo.wants_node_list, as an
// agent writing a hostfile does; --node-list asks for every simulated agent: ~47 bytes per node
// per agent, O(M^2) for the round). By default its fields are
// read as the bytes arrive (RoundStartedScan) and the node list is only counted;
// --full-parse buffers each message and parses it as v1::ServerMessage, as a real agent does.
// Other ServerMessages are always parsed with the generated class.
//
// SETTINGS and flow control: those of gRPC 1.51's client (ClientPreface), with a --window
// byte receive window (default 4194303, as gRPC: SETTINGS_INITIAL_WINDOW_SIZE and a
// connection WINDOW_UPDATE); received bytes go back with WINDOW_UPDATE once half is used.
//
// --hold-secs S: after the round (and 1.5 s to settle, as rdzv_load, after spreading the
// keepalive probes: Load::StaggerKeepalive), keep every stream open S seconds without
// messages (the hb_window, as rdzv_load --no-app-heartbeats).
// --tcp-keepalive-ms T: TCP keepalive on each connection as an agent's channel has it
// (rendezvous/grpc/tcp_keepalive.cc: probe after T ms of silence, give up after 3 T).
//
// Self-check after the round: one round number, group ranks a permutation of 0..M-1, rank
// bases {0, L, ..., (M-1) L}, world sizes M and M x L, M nodes listed (none without
// --node-list).
// Exit: 0 ok, 1 the round or a check failed, 2 usage or setup, 3 connect failed.
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "h2_wire.h"
#include "muster/v1/rendezvous.pb.h"
#include "rdzv_load_common.h"

namespace muster::bench {
namespace {

using Clock = std::chrono::steady_clock;
namespace v1 = muster::v1;

struct Args {
  int port = 0;
  int m = 0;
  std::string host = "127.0.0.1";
  std::string run_id = "b2";
  int local_world_size = 1;
  int tcp_keepalive_ms = 0;
  double hold_secs = 0;
  bool full_parse = false;
  bool node_list = false;
  uint32_t window = 4194303;
  double timeout_secs = 60;
  int max_connecting = 512;
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(
      stderr,
      "rdzv_h2load: %s\nusage: rdzv_h2load PORT M [--host H] [--run-id ID] "
      "[--local-world-size L] [--tcp-keepalive-ms T] [--hold-secs S] [--full-parse] [--node-list] "
      "[--window BYTES] [--timeout-secs D]\n",
      why.c_str());
  std::exit(2);
}

Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) Usage("missing value for " + arg);
      return argv[++i];
    };
    try {
      if (arg == "--host") {
        a.host = value();
      } else if (arg == "--run-id") {
        a.run_id = value();
      } else if (arg == "--local-world-size") {
        a.local_world_size = std::stoi(value());
      } else if (arg == "--tcp-keepalive-ms") {
        a.tcp_keepalive_ms = std::stoi(value());
      } else if (arg == "--hold-secs") {
        a.hold_secs = std::stod(value());
      } else if (arg == "--full-parse") {
        a.full_parse = true;
      } else if (arg == "--node-list") {
        a.node_list = true;
      } else if (arg == "--window") {
        a.window = static_cast<uint32_t>(std::stoul(value()));
      } else if (arg == "--timeout-secs") {
        a.timeout_secs = std::stod(value());
      } else if (!arg.empty() && arg[0] == '-') {
        Usage("unknown flag " + arg);
      } else {
        positional.push_back(arg);
      }
    } catch (const std::exception&) {
      Usage("bad value for " + arg);
    }
  }
  if (positional.size() != 2) Usage("needs PORT and M");
  try {
    a.port = std::stoi(positional[0]);
    a.m = std::stoi(positional[1]);
  } catch (const std::exception&) {
    Usage("PORT and M must be integers");
  }
  if (a.m < 1 || a.local_world_size < 1 || a.timeout_secs <= 0 || a.hold_secs < 0) {
    Usage("M and L must be >= 1, the timeout > 0, the hold >= 0");
  }
  // 65535..2^31-1 (RFC 9113 §6.9.2); below 65535 the connection window would need shrinking.
  if (a.window < 65535 || a.window > 0x7fffffffu) Usage("--window must be in [65535, 2^31-1]");
  return a;
}

// ---- one agent's connection ----

enum class Phase { kConnecting, kHandshake, kUp, kJoined, kRoundStarted, kLeaving, kDone };

struct Agent {
  int index = 0;
  int fd = -1;
  Phase phase = Phase::kConnecting;
  bool leave_sent = false;

  // HTTP/2 frame being read.
  uint8_t head[9];
  int head_have = 0;
  uint32_t length = 0, left = 0;  // payload bytes: in all, not yet read
  uint8_t type = 0, flags = 0;
  uint32_t stream = 0;
  int pad = -1;         // DATA with PADDED: -1 until the pad length byte is read
  std::string payload;  // control frames (SETTINGS, PING, RST_STREAM, GOAWAY)
  uint32_t unacked_conn = 0, unacked_stream = 0;  // DATA bytes not yet given back

  // gRPC message being read from DATA on stream 1.
  uint8_t prefix[5];
  int prefix_have = 0;
  uint32_t msg_left = 0;
  enum { kUndecided, kScan, kBuffer } msg_mode = kUndecided;
  std::string msg;
  RoundStartedScan scan;

  Assigned assigned;
  std::string out;  // bytes to write (control frames, or the rest of a short write)
  size_t out_done = 0;
  bool want_write = false;
};

// All agents on one epoll set; single-threaded. Errors stop the current phase.
class Load {
 public:
  explicit Load(const Args& args) : a_(args), agents_(args.m) {
    for (int i = 0; i < a_.m; ++i) agents_[i].index = i;
  }

  bool Setup() {
    epfd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epfd_ < 0) return SysFail("epoll_create1");
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    int rc = getaddrinfo(a_.host.c_str(), std::to_string(a_.port).c_str(), &hints, &res);
    if (rc != 0) return Fail("getaddrinfo(" + a_.host + "): " + gai_strerror(rc));
    std::memcpy(&addr_, res->ai_addr, res->ai_addrlen);
    addr_len_ = res->ai_addrlen;
    family_ = res->ai_family;
    freeaddrinfo(res);
    std::string authority = a_.host.find(':') != std::string::npos ? "[" + a_.host + "]" : a_.host;
    authority += ":" + std::to_string(a_.port);
    // What a gRPC client sends for a call (gRPC's PROTOCOL-HTTP2.md).
    AppendHpackLiteral(":method", "POST", &request_headers_);
    AppendHpackLiteral(":scheme", "http", &request_headers_);
    AppendHpackLiteral(":path", "/muster.v1.Rendezvous/Session", &request_headers_);
    AppendHpackLiteral(":authority", authority, &request_headers_);
    AppendHpackLiteral("content-type", "application/grpc", &request_headers_);
    AppendHpackLiteral("te", "trailers", &request_headers_);
    preface_ = ClientPreface(a_.window);
    return true;
  }

  // Connects every agent; up = the server's SETTINGS arrived.
  bool Connect() {
    int next = 0, connecting = 0;
    Clock::time_point deadline = Deadline();
    while (up_ < a_.m) {
      while (next < a_.m && connecting < a_.max_connecting) {
        if (!StartConnect(&agents_[next++])) return false;
        ++connecting;
      }
      int before = up_;
      if (!Poll(deadline, "connect")) return false;
      connecting -= up_ - before;
    }
    return true;
  }

  // Writes every Join (HEADERS + DATA, one write each) and waits for every RoundStarted.
  bool Join(Clock::time_point* first_written) {
    std::vector<std::string> joins(a_.m);  // built before the clock
    for (int i = 0; i < a_.m; ++i) {
      AppendFrameHeader(static_cast<uint32_t>(request_headers_.size()), kHeaders, kFlagEndHeaders,
                        kStream, &joins[i]);
      joins[i] += request_headers_;
      AppendGrpcMessage(JoinMessage(i), false, &joins[i]);
    }
    *first_written = Clock::now();
    for (Agent& g : agents_) {
      g.phase = Phase::kJoined;
      if (!Send(&g, std::move(joins[g.index]))) return false;
    }
    all_joins_written_ = Clock::now();
    return RunUntil([&] { return round_started_ == a_.m; }, "round");
  }

  bool Hold(double secs) {
    Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(secs));
    while (Clock::now() < end) {
      if (!Poll(end, nullptr)) return false;
    }
    return true;
  }

  // Spreads the agents' TCP keepalive probes evenly over one probe interval. This client
  // reads every RoundStarted within a few hundred ms, so all connections go idle at once and
  // their probes (with the server's) come in bursts of thousands per timer tick: at 4096
  // agents that overflowed loopback's backlog (net.core.netdev_max_backlog 1000; drops in
  // /proc/net/softnet_stat) and TCP_USER_TIMEOUT aborted connections. Real agents on
  // separate hosts go idle at scattered times; rdzv_load's slower reads scatter them too.
  // SO_KEEPALIVE off and on restarts an idle socket's probe timer from now.
  bool StaggerKeepalive() {
    if (a_.tcp_keepalive_ms <= 0) return true;
    const Clock::duration interval = std::chrono::seconds((a_.tcp_keepalive_ms + 999) / 1000);
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < a_.m;) {
      Clock::time_point due = start + interval * i / a_.m;
      if (Clock::now() < due) {
        if (!Poll(due, nullptr)) return false;
        continue;
      }
      int fd = agents_[i++].fd;
      for (int on : {0, 1}) {
        if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on) != 0) {
          return SysFail("setsockopt(SO_KEEPALIVE)");
        }
      }
    }
    return true;
  }

  // Leave + END_STREAM on every stream; done when every server side has ended.
  bool Leave() {
    v1::AgentMessage leave;
    leave.mutable_leave()->set_why("benchmark over");
    std::string bytes;
    AppendGrpcMessage(leave, true, &bytes);
    for (Agent& g : agents_) {
      g.leave_sent = true;
      if (g.phase == Phase::kRoundStarted) g.phase = Phase::kLeaving;
      if (!Send(&g, bytes)) return false;
    }
    return RunUntil([&] { return done_ == a_.m; }, "leave");
  }

  void CloseAll() {
    for (Agent& g : agents_) {
      if (g.fd >= 0) close(g.fd);  // nothing to do about a failed close of a socket we drop
      g.fd = -1;
    }
  }

  // The self-check; returns "" when the assignments form one valid round.
  std::string Check() const {
    const int64_t m = a_.m, l = a_.local_world_size;
    const int64_t nodes = a_.node_list ? m : 0;
    std::vector<char> group_seen(m), base_seen(m);
    int64_t round = agents_[0].assigned.round;
    for (const Agent& g : agents_) {
      const Assigned& s = g.assigned;
      std::string who = "agent b2-" + std::to_string(g.index) + ": ";
      if (s.round != round) {
        return who + "round " + std::to_string(s.round) + " vs " + std::to_string(round);
      }
      if (s.group_world_size != m || s.world_size != m * l || s.nodes != nodes) {
        return who + "group_world_size " + std::to_string(s.group_world_size) + ", world_size " +
               std::to_string(s.world_size) + ", " + std::to_string(s.nodes) + " nodes";
      }
      if (s.group_rank < 0 || s.group_rank >= m || group_seen[s.group_rank]++) {
        return who + "group rank " + std::to_string(s.group_rank) + " out of range or repeated";
      }
      if (s.rank_base < 0 || s.rank_base % l != 0 || s.rank_base / l >= m ||
          base_seen[s.rank_base / l]++) {
        return who + "rank base " + std::to_string(s.rank_base) + " out of range or repeated";
      }
    }
    return "";
  }

  const std::string& error() const { return error_; }
  Clock::time_point last_round_started() const { return last_round_started_; }
  // When the client had written (not necessarily sent) every Join, and when the first
  // RoundStarted arrived: where the round's time went (joins, server, broadcast).
  Clock::time_point all_joins_written() const { return all_joins_written_; }
  Clock::time_point first_round_started() const { return first_round_started_; }
  Clock::time_point last_done() const { return last_done_; }
  int round_started() const { return round_started_; }
  int done() const { return done_; }
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  Clock::time_point Deadline() const {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(a_.timeout_secs));
  }

  v1::AgentMessage JoinMessage(int index) const {
    // rdzv_load.cc's Join, its heartbeat interval at the default 1 s.
    return B2Join(a_.run_id, a_.m, index, a_.local_world_size, 1000, a_.node_list);
  }

  bool StartConnect(Agent* g) {
    g->fd = socket(family_, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (g->fd < 0) return SysFail("socket");
    int one = 1;
    // As gRPC sets on its sockets; the agent's small writes must not wait for ACKs.
    if (setsockopt(g->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
      return SysFail("setsockopt(TCP_NODELAY)");
    }
    if (a_.tcp_keepalive_ms > 0 && !SetTcpKeepalive(g->fd)) return false;
    if (connect(g->fd, reinterpret_cast<const sockaddr*>(&addr_), addr_len_) != 0 &&
        errno != EINPROGRESS) {
      return SysFail("connect (agent " + std::to_string(g->index) + ")");
    }
    // EPOLLOUT reports the outcome, also of an immediate success.
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.u32 = static_cast<uint32_t>(g->index);
    if (epoll_ctl(epfd_, EPOLL_CTL_ADD, g->fd, &ev) != 0) return SysFail("epoll_ctl(ADD)");
    return true;
  }

  // rendezvous/grpc/tcp_keepalive.cc's SetTcpKeepalive with interval T and timeout 3 T.
  bool SetTcpKeepalive(int fd) {
    int probe_s = std::clamp((a_.tcp_keepalive_ms + 999) / 1000, 1, 32767);
    int timeout_ms = 3 * a_.tcp_keepalive_ms;
    int count = std::clamp((timeout_ms / 1000 + probe_s - 1) / probe_s, 1, 127);
    struct Option {
      int level, name;
      const char* text;
      int value;
    };
    for (const Option& o :
         {Option{SOL_SOCKET, SO_KEEPALIVE, "SO_KEEPALIVE", 1},
          Option{IPPROTO_TCP, TCP_KEEPIDLE, "TCP_KEEPIDLE", probe_s},
          Option{IPPROTO_TCP, TCP_KEEPINTVL, "TCP_KEEPINTVL", probe_s},
          Option{IPPROTO_TCP, TCP_KEEPCNT, "TCP_KEEPCNT", count},
          Option{IPPROTO_TCP, TCP_USER_TIMEOUT, "TCP_USER_TIMEOUT", timeout_ms}}) {
      if (setsockopt(fd, o.level, o.name, &o.value, sizeof o.value) != 0) {
        return SysFail(std::string("setsockopt(") + o.text + ")");
      }
    }
    return true;
  }

  // Runs the loop until done() or the phase's deadline.
  bool RunUntil(const std::function<bool()>& done, const char* phase) {
    Clock::time_point deadline = Deadline();
    while (!done()) {
      if (!Poll(deadline, phase)) return false;
    }
    return true;
  }

  // One epoll_wait and its events. `phase` names a phase whose deadline passing is an
  // error; nullptr: the deadline is just the end of a wait.
  bool Poll(Clock::time_point deadline, const char* phase) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      if (phase == nullptr) return true;
      char secs[32];
      std::snprintf(secs, sizeof secs, "%g", a_.timeout_secs);
      return Fail(std::string(phase) + ": the deadline of " + secs + " s passed (" + Pending() +
                  ")");
    }
    int n = epoll_wait(epfd_, events_, kMaxEvents,
                       static_cast<int>(std::min<int64_t>(left.count() + 1, 1000)));
    if (n < 0) {
      if (errno == EINTR) return true;  // no handlers are installed; a stop/continue
      return SysFail("epoll_wait");
    }
    for (int i = 0; i < n; ++i) {
      Agent& g = agents_[events_[i].data.u32];
      if (g.fd < 0) continue;
      if (!Handle(&g, events_[i].events)) return false;
    }
    return true;
  }

  std::string Pending() const {
    int phases[7] = {};
    for (const Agent& g : agents_) ++phases[static_cast<int>(g.phase)];
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "agents connecting %d, handshaking %d, up %d, joined %d, round started %d, "
                  "leaving %d, done %d",
                  phases[0], phases[1], phases[2], phases[3], phases[4], phases[5], phases[6]);
    return buf;
  }

  bool Handle(Agent* g, uint32_t events) {
    if (g->phase == Phase::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      if (getsockopt(g->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
        return SysFail("getsockopt(SO_ERROR)");
      }
      if (err != 0) {
        return Fail("agent b2-" + std::to_string(g->index) + ": connect: " + std::strerror(err));
      }
      g->phase = Phase::kHandshake;
      return Watch(g) && Send(g, preface_);
    }
    if (events & EPOLLOUT) {
      if (!Flush(g)) return false;
    }
    if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
      ssize_t n = read(g->fd, buf_, sizeof buf_);
      if (n < 0) {
        if ((errno == EAGAIN || errno == EINTR) && !(events & EPOLLERR)) return true;
        int err = errno;
        socklen_t len = sizeof err;
        if ((errno == EAGAIN || errno == EINTR) &&
            getsockopt(g->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
          return SysFail("getsockopt(SO_ERROR)");
        }
        return AgentFail(*g, err == 0 ? std::string("read: an error event, SO_ERROR 0")
                                      : std::string("read: ") + std::strerror(err));
      }
      if (n == 0) {
        if (g->phase == Phase::kDone) {  // the server closed after ending the stream
          Unwatch(g);
          return true;
        }
        return AgentFail(*g, "the server closed the connection");
      }
      if (!Frames(g, buf_, static_cast<size_t>(n))) return false;
      if (!Flush(g)) return false;
    }
    return true;
  }

  // Reads whatever frames (or parts) the bytes hold.
  bool Frames(Agent* g, const uint8_t* p, size_t n) {
    while (n > 0) {
      if (g->head_have < 9) {
        size_t k = std::min<size_t>(n, 9 - g->head_have);
        std::memcpy(g->head + g->head_have, p, k);
        g->head_have += static_cast<int>(k);
        p += k;
        n -= k;
        if (g->head_have < 9) return true;
        g->length = (g->head[0] << 16) | (g->head[1] << 8) | g->head[2];
        g->type = g->head[3];
        g->flags = g->head[4];
        g->stream =
            ((g->head[5] & 0x7fu) << 24) | (g->head[6] << 16) | (g->head[7] << 8) | g->head[8];
        g->left = g->length;
        g->pad = -1;
        g->payload.clear();
        if (g->length > kMaxFrameSize) {
          return AgentFail(*g, "a frame of " + std::to_string(g->length) +
                                   " bytes exceeds SETTINGS_MAX_FRAME_SIZE");
        }
        if (g->type == kData && !(g->flags & kFlagPadded)) g->pad = 0;
        if (g->left == 0 && !EndFrame(g)) return false;
        continue;
      }
      size_t k = std::min<size_t>(n, g->left);
      if (g->type == kData) {
        if (!DataBytes(g, p, k)) return false;
      } else if (g->type != kHeaders && g->type != 9 /* CONTINUATION */) {
        g->payload.append(reinterpret_cast<const char*>(p), k);
      }  // header blocks are skipped undecoded
      g->left -= static_cast<uint32_t>(k);
      p += k;
      n -= k;
      if (g->left == 0 && !EndFrame(g)) return false;
    }
    return true;
  }

  // Payload bytes of a DATA frame: padding taken off, the rest to the gRPC message reader.
  bool DataBytes(Agent* g, const uint8_t* p, size_t k) {
    uint32_t offset = g->length - g->left;  // of p[0] in the payload
    if (g->pad < 0) {                       // PADDED: the first byte is the pad length
      g->pad = p[0];
      if (static_cast<uint32_t>(g->pad) + 1 > g->length) {
        return AgentFail(*g, "DATA padding longer than the frame");
      }
      ++p;
      --k;
      ++offset;
    }
    uint32_t data_end = g->length - static_cast<uint32_t>(g->pad);
    if (offset >= data_end || g->stream != kStream) return true;
    k = std::min<size_t>(k, data_end - offset);
    return GrpcBytes(g, p, k);
  }

  // gRPC length-prefixed messages (PROTOCOL-HTTP2.md), across DATA frames.
  bool GrpcBytes(Agent* g, const uint8_t* p, size_t n) {
    while (n > 0) {
      if (g->prefix_have < 5) {
        size_t k = std::min<size_t>(n, 5 - g->prefix_have);
        std::memcpy(g->prefix + g->prefix_have, p, k);
        g->prefix_have += static_cast<int>(k);
        p += k;
        n -= k;
        if (g->prefix_have < 5) return true;
        if (g->prefix[0] != 0) return AgentFail(*g, "a compressed message (none was offered)");
        g->msg_left = (static_cast<uint32_t>(g->prefix[1]) << 24) | (g->prefix[2] << 16) |
                      (g->prefix[3] << 8) | g->prefix[4];
        g->msg_mode = Agent::kUndecided;
        if (g->msg_left == 0 && !EndMessage(g)) return false;
        continue;
      }
      if (g->msg_mode == Agent::kUndecided) {
        // 0x12: field 2 (round_started), length-delimited: the one large message.
        if (p[0] == 0x12 && !a_.full_parse) {
          g->msg_mode = Agent::kScan;
          g->scan.Reset(g->msg_left);
        } else {
          g->msg_mode = Agent::kBuffer;
          g->msg.clear();
          g->msg.reserve(g->msg_left);
        }
      }
      size_t k = std::min<size_t>(n, g->msg_left);
      if (g->msg_mode == Agent::kScan) {
        if (!g->scan.Feed(p, k)) return AgentFail(*g, "RoundStarted: " + g->scan.error());
      } else {
        g->msg.append(reinterpret_cast<const char*>(p), k);
      }
      g->msg_left -= static_cast<uint32_t>(k);
      p += k;
      n -= k;
      if (g->msg_left == 0 && !EndMessage(g)) return false;
    }
    return true;
  }

  bool EndMessage(Agent* g) {
    g->prefix_have = 0;
    if (g->msg_mode == Agent::kScan) {
      if (!g->scan.Complete()) return AgentFail(*g, "RoundStarted: truncated or no assignment");
      return RoundStarted(g, g->scan.assigned());
    }
    v1::ServerMessage msg;
    if (!msg.ParseFromString(g->msg)) return AgentFail(*g, "malformed ServerMessage");
    std::string().swap(g->msg);  // a 4096-node message is not kept per agent
    switch (msg.kind_case()) {
      case v1::ServerMessage::kProgress:
        return true;
      case v1::ServerMessage::kRoundStarted: {
        const v1::Assignment& in = msg.round_started().assignment();
        Assigned s;
        s.round = in.round();
        s.group_rank = in.group_rank();
        s.group_world_size = in.group_world_size();
        s.rank_base = in.rank_base();
        s.world_size = in.world_size();
        s.nodes = in.nodes_size();
        return RoundStarted(g, s);
      }
      case v1::ServerMessage::kStopWorkers:
      case v1::ServerMessage::kFinished:
        // The job ends as the first agents leave; before that it is a failure.
        if (g->leave_sent) return true;
        return AgentFail(
            *g, "unexpected " +
                    std::string(msg.kind_case() == v1::ServerMessage::kFinished ? "Finished"
                                                                                : "StopWorkers") +
                    ": " + msg.ShortDebugString());
      case v1::ServerMessage::kError:
        return AgentFail(*g, "server Error " + std::to_string(msg.error().code()) + ": " +
                                 msg.error().message());
      default:
        return AgentFail(*g, "unexpected ServerMessage (kind " +
                                 std::to_string(static_cast<int>(msg.kind_case())) + ")");
    }
  }

  bool RoundStarted(Agent* g, const Assigned& s) {
    if (g->phase != Phase::kJoined) return AgentFail(*g, "a second RoundStarted");
    g->assigned = s;
    g->phase = g->leave_sent ? Phase::kLeaving : Phase::kRoundStarted;
    if (round_started_ == 0) first_round_started_ = Clock::now();
    if (++round_started_ == a_.m) last_round_started_ = Clock::now();
    return true;
  }

  bool EndFrame(Agent* g) {
    g->head_have = 0;
    switch (g->type) {
      case kData:
        data_bytes_ += g->length;
        // Flow control counts the whole payload, padding included (RFC 9113 §6.9).
        g->unacked_conn += g->length;
        if (g->unacked_conn > a_.window / 2) {
          AppendWindowUpdate(0, g->unacked_conn, &g->out);
          g->unacked_conn = 0;
        }
        if (g->stream == kStream && !(g->flags & kFlagEndStream)) {
          g->unacked_stream += g->length;
          if (g->unacked_stream > a_.window / 2) {
            AppendWindowUpdate(kStream, g->unacked_stream, &g->out);
            g->unacked_stream = 0;
          }
        }
        if (g->stream == kStream && (g->flags & kFlagEndStream)) return StreamEnded(g, "");
        return true;
      case kHeaders:
        // The server's initial metadata, or with END_STREAM its trailers.
        if (g->stream == kStream && (g->flags & kFlagEndStream)) return StreamEnded(g, "");
        return true;
      case kRstStream: {
        if (g->stream != kStream) return true;
        uint32_t code = g->payload.size() == 4 ? Be32(g->payload.data()) : 0xffffffffu;
        return StreamEnded(g, "RST_STREAM, error code " + std::to_string(code));
      }
      case kSettings:
        if (g->stream != 0 || g->payload.size() % 6 != 0) {
          return AgentFail(*g, "malformed SETTINGS");
        }
        if (g->flags & kFlagAck) return true;
        AppendFrameHeader(0, kSettings, kFlagAck, 0, &g->out);
        if (g->phase == Phase::kHandshake) {
          g->phase = Phase::kUp;
          ++up_;
        }
        return true;
      case kPing:
        if (g->payload.size() != 8) return AgentFail(*g, "malformed PING");
        if (g->flags & kFlagAck) return true;
        AppendFrameHeader(8, kPing, kFlagAck, 0, &g->out);
        g->out += g->payload;
        return true;
      case kGoaway: {
        uint32_t code = g->payload.size() >= 8 ? Be32(g->payload.data() + 4) : 0xffffffffu;
        std::string debug = g->payload.size() > 8 ? " (" + g->payload.substr(8) + ")" : "";
        if (g->phase == Phase::kDone) return true;
        return AgentFail(*g, "GOAWAY, error code " + std::to_string(code) + debug);
      }
      case kPushPromise:
        return AgentFail(*g, "PUSH_PROMISE although SETTINGS_ENABLE_PUSH is 0");
      default:  // WINDOW_UPDATE: our writes are far below any window; PRIORITY; unknown
        return true;
    }
  }

  static uint32_t Be32(const char* p) {
    const auto* u = reinterpret_cast<const uint8_t*>(p);
    return (static_cast<uint32_t>(u[0]) << 24) | (u[1] << 16) | (u[2] << 8) | u[3];
  }

  // The server ended stream 1: fine after our Leave, else the agent failed.
  bool StreamEnded(Agent* g, const std::string& how) {
    if (g->phase == Phase::kDone) return true;  // RST_STREAM after the trailers
    if (g->phase != Phase::kLeaving) {
      return AgentFail(*g, g->phase == Phase::kRoundStarted
                               ? "the stream ended before Leave" + Suffix(how)
                               : "the stream ended before RoundStarted" + Suffix(how));
    }
    g->phase = Phase::kDone;
    if (++done_ == a_.m) last_done_ = Clock::now();
    return true;
  }

  static std::string Suffix(const std::string& how) { return how.empty() ? "" : " (" + how + ")"; }

  // Queues bytes and writes what the socket takes.
  bool Send(Agent* g, std::string bytes) {
    if (g->out.empty()) {
      g->out = std::move(bytes);
    } else {
      g->out += bytes;
    }
    return Flush(g);
  }

  bool Flush(Agent* g) {
    while (g->out_done < g->out.size()) {
      ssize_t n =
          send(g->fd, g->out.data() + g->out_done, g->out.size() - g->out_done, MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) break;
        return AgentFail(*g, std::string("send: ") + std::strerror(errno));
      }
      g->out_done += static_cast<size_t>(n);
    }
    if (g->out_done == g->out.size()) {
      g->out.clear();
      g->out_done = 0;
    }
    bool want = !g->out.empty();
    if (want != g->want_write && g->phase != Phase::kConnecting) return Watch(g);
    return true;
  }

  // Readable always; writable while bytes wait.
  bool Watch(Agent* g) {
    epoll_event ev{};
    ev.events = EPOLLIN | (g->out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT));
    g->want_write = !g->out.empty();
    ev.data.u32 = static_cast<uint32_t>(g->index);
    if (epoll_ctl(epfd_, EPOLL_CTL_MOD, g->fd, &ev) != 0) return SysFail("epoll_ctl(MOD)");
    return true;
  }

  void Unwatch(Agent* g) {
    // An fd still open stays registered only until closed; a failed DEL changes nothing.
    epoll_ctl(epfd_, EPOLL_CTL_DEL, g->fd, nullptr);
  }

  bool AgentFail(const Agent& g, const std::string& why) {
    return Fail("agent b2-" + std::to_string(g.index) + ": " + why);
  }
  bool SysFail(const std::string& call) { return Fail(call + ": " + std::strerror(errno)); }
  bool Fail(const std::string& why) {
    if (error_.empty()) error_ = why;
    return false;
  }

  static constexpr int kMaxEvents = 1024;
  const Args& a_;
  std::vector<Agent> agents_;
  int epfd_ = -1;
  sockaddr_storage addr_{};
  socklen_t addr_len_ = 0;
  int family_ = AF_INET;
  std::string request_headers_;  // the HPACK block of every agent's HEADERS
  std::string preface_;
  int up_ = 0, round_started_ = 0, done_ = 0;
  uint64_t data_bytes_ = 0;
  Clock::time_point last_round_started_, last_done_, all_joins_written_, first_round_started_;
  std::string error_;  // the first failure; it ends the phase
  epoll_event events_[kMaxEvents];
  uint8_t buf_[256 * 1024];
};

}  // namespace

int Main(int argc, char** argv) {
  Args a = Parse(argc, argv);
  RaiseFdLimit();
  auto load = std::make_unique<Load>(a);
  if (!load->Setup()) {
    std::fprintf(stderr, "rdzv_h2load: %s\n", load->error().c_str());
    return 2;
  }

  // Phase 1 (untimed for the round): every agent's connection and HTTP/2 handshake.
  double cpu0 = CpuSeconds();
  Clock::time_point t0 = Clock::now();
  if (!load->Connect()) {
    std::fprintf(stderr, "rdzv_h2load: %s\n", load->error().c_str());
    return 3;
  }
  double connect_ms = Ms(Clock::now() - t0);
  double cpu_connect = CpuSeconds() - cpu0;

  // Phase 2: every agent joins; the round starts when the last one has.
  std::fprintf(stderr, "phase join start\n");
  double cpu1 = CpuSeconds();
  Clock::time_point t_first;
  bool formed = load->Join(&t_first);
  double cpu_round = CpuSeconds() - cpu1;
  std::fprintf(stderr, "phase join end\n");
  uint64_t round_bytes = load->data_bytes();
  std::string check = formed ? load->Check() : "";
  if (!check.empty()) formed = false;

  std::string extra;
  bool ok = formed;
  if (ok && a.hold_secs > 0) {
    // Settle as rdzv_load does, then the window with every stream open and silent.
    ok = load->StaggerKeepalive() && load->Hold(1.5);
    double cpu2 = CpuSeconds();
    std::fprintf(stderr, "hb_window start %.6f\n", MonotonicSeconds());
    ok = ok && load->Hold(a.hold_secs);
    std::fprintf(stderr, "hb_window end %.6f\n", MonotonicSeconds());
    char buf[120];
    std::snprintf(buf, sizeof buf, ", \"client_cpu_hb_s\": %.6f, \"heartbeats_sent\": 0",
                  CpuSeconds() - cpu2);
    extra += buf;
  }

  // Phase 3: Leave; the server ends each stream.
  if (ok) {
    std::fprintf(stderr, "phase leave start\n");
    double cpu3 = CpuSeconds();
    Clock::time_point t_leave = Clock::now();
    bool left = load->Leave();
    double cpu_leave = CpuSeconds() - cpu3;
    std::fprintf(stderr, "phase leave end\n");
    char buf[160];
    if (left) {
      std::snprintf(buf, sizeof buf, ", \"leave_ms\": %.3f, \"client_cpu_leave_s\": %.6f",
                    Ms(load->last_done() - t_leave), cpu_leave);
    } else {
      std::snprintf(buf, sizeof buf,
                    ", \"leave_ms\": null, \"leave_pending\": %d, \"client_cpu_leave_s\": %.6f",
                    a.m - load->done(), cpu_leave);
    }
    extra += buf;
  }
  load->CloseAll();

  std::string error = !check.empty() ? "self-check: " + check : load->error();
  if (!error.empty()) std::fprintf(stderr, "rdzv_h2load: %s\n", error.c_str());
  char round_ms[120] = "null";
  if (formed) {
    std::snprintf(round_ms, sizeof round_ms,
                  "%.3f, \"joins_written_ms\": %.3f, \"first_round_started_ms\": %.3f",
                  Ms(load->last_round_started() - t_first), Ms(load->all_joins_written() - t_first),
                  Ms(load->first_round_started() - t_first));
  }
  std::printf(
      "{\"m\": %d, \"client\": \"h2\", \"full_parse\": %s, \"connect_ms\": %.3f, "
      "\"client_cpu_connect_s\": %.6f, \"round_ms\": %s, \"client_cpu_round_s\": %.6f, "
      "\"round_data_bytes\": %llu, \"errors\": [%s], \"n_errors\": %d%s}\n",
      a.m, a.full_parse ? "true" : "false", connect_ms, cpu_connect, round_ms, cpu_round,
      static_cast<unsigned long long>(round_bytes), error.empty() ? "" : JsonString(error).c_str(),
      error.empty() ? 0 : 1, extra.c_str());
  std::fflush(stdout);
  return error.empty() ? 0 : 1;
}

}  // namespace muster::bench

int main(int argc, char** argv) { return muster::bench::Main(argc, argv); }

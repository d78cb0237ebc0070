// storeload: TCPStore-protocol load generator for B3/B4 (reference/perf.md §7), plus a raw
// loopback echo server as the physical-limit baseline. One thread, epoll, nonblocking sockets.
// Speaks the wire protocol byte by byte (reference/torch_contract.md §1.3):
//   legacy (torch 1.13 numbering: SET 0, COMPARE_SET 1, GET 2, ADD 3, CHECK 4, WAIT 5,
//           MULTI_GET 10 (2.1-era)),
//   modern (torch >= 2.4: VALIDATE 0 first (u32 magic 0x3C85F7CE, no reply), SET 1,
//           COMPARE_SET 2, GET 3, ADD 4, CHECK 5, WAIT 6, MULTI_GET 10, PING 13),
//   echo   (send the request bytes, wait for the same number back).
//
//   storeload echo-server                         prints "PORT <n>", serves until killed
//   storeload load HOST PORT PROTO CLIENTS OPS SIZES WARMUP_S MEASURE_S
//        OPS   = comma list of set,get,add,wait,cas,mget,echo
//        SIZES = comma list of value sizes in bytes (ignored by add/wait)
//        one JSON line per (op,size): ops/s, p50/p99/max latency (us), errors
//   storeload storm HOST PORT PROTO N ROUNDS TAG [PROCS]
//        N clients, spread over PROCS processes (default 1), connect at once (+ first
//        round trip), then ROUNDS store-based barriers (ADD(key,1); the client that reads
//        N SETs key/done; everyone WAITs key/done). Each phase starts in all processes
//        together (process_gang.h). One JSON line: connect_ms, established_ms,
//        round_ms[], resets, retries.
// Closed loop: every connection has exactly one request outstanding. SET has no reply in
// the protocol, so the "set" op is SET followed by CHECK([key]) in one send (1 round trip).
// "get" is a raw GET (1 round trip; torch's client precedes it by a WAIT).
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "process_gang.h"

static double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}
static uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void raise_nofile() {
  rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

// ------------------------------------------------------------------ encoding

struct Proto {
  bool modern = false, echo = false;
  uint8_t SET, CAS, GET, ADD, CHECK, WAIT, MGET;
  explicit Proto(const std::string& p) {
    modern = p == "modern";
    echo = p == "echo";
    if (modern) {
      SET = 1;
      CAS = 2;
      GET = 3;
      ADD = 4;
      CHECK = 5;
      WAIT = 6;
      MGET = 10;
    } else {
      SET = 0;
      CAS = 1;
      GET = 2;
      ADD = 3;
      CHECK = 4;
      WAIT = 5;
      MGET = 10;
    }
  }
};

static void put_u64(std::string& b, uint64_t v) { b.append((const char*)&v, 8); }
static void put_str(std::string& b, const std::string& s) {
  put_u64(b, s.size());
  b += s;
}

// Response shape: 'b' = 1 byte, 'i' = 4 bytes, 'q' = 8 bytes, 's' = u64 length + bytes.
struct Req {
  std::string bytes;
  std::string shape;
};

static Req make_req(const Proto& P, const std::string& op, const std::string& key,
                    const std::string& val, int nkeys, const std::vector<std::string>& mkeys) {
  Req r;
  std::string& b = r.bytes;
  if (op == "set") {
    b += (char)P.SET;
    put_str(b, key);
    put_str(b, val);
    b += (char)P.CHECK;
    put_u64(b, 1);
    put_str(b, key);
    r.shape = "b";
  } else if (op == "get") {
    b += (char)P.GET;
    put_str(b, key);
    r.shape = "s";
  } else if (op == "add") {
    b += (char)P.ADD;
    put_str(b, key);
    put_u64(b, 1);
    r.shape = "q";
  } else if (op == "wait") {
    b += (char)P.WAIT;
    put_u64(b, 1);
    put_str(b, key);
    r.shape = "b";
  } else if (op == "cas") {
    b += (char)P.CAS;
    put_str(b, key);
    put_str(b, val);
    put_str(b, val);
    r.shape = "s";
  } else if (op == "mget") {
    b += (char)P.MGET;
    put_u64(b, nkeys);
    for (int i = 0; i < nkeys; i++) put_str(b, mkeys[i]);
    r.shape.assign(nkeys, 's');
  } else if (op == "echo") {
    b.assign(32, 'e');
    r.shape = "E32";  // special: 32 raw bytes
  } else {
    fprintf(stderr, "unknown op %s\n", op.c_str());
    exit(2);
  }
  return r;
}

// Returns bytes consumed by a complete response at buf[0..n), or 0 if incomplete.
static size_t parse_resp(const std::string& shape, const char* buf, size_t n) {
  if (shape[0] == 'E') {
    size_t want = (size_t)atoi(shape.c_str() + 1);
    return n >= want ? want : 0;
  }
  size_t off = 0;
  for (char c : shape) {
    size_t need = c == 'b' ? 1 : c == 'i' ? 4 : 8;
    if (n - off < need) return 0;
    if (c == 's') {
      uint64_t len;
      memcpy(&len, buf + off, 8);
      if (n - off - 8 < len) return 0;
      off += 8 + len;
    } else {
      off += need;
    }
  }
  return off;
}

// ------------------------------------------------------------------ connections

struct Conn {
  int fd = -1;
  std::string rbuf;
  std::string out;  // pending bytes to send
  size_t out_off = 0;
  uint64_t t_send = 0;
  int state = 0;  // mode-specific
  bool busy = false;
  bool connected = false;
  int idx = 0;
};

static int g_ep;
static sockaddr_in g_addr;
static long g_resets = 0, g_retries = 0, g_errors = 0;

static int open_conn(Conn& c, uint32_t ev_idx) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    perror("socket");
    exit(3);
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  int r = connect(fd, (sockaddr*)&g_addr, sizeof g_addr);
  if (r != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  c.fd = fd;
  c.connected = false;
  c.rbuf.clear();
  c.out_off = 0;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u32 = ev_idx;
  epoll_ctl(g_ep, EPOLL_CTL_ADD, fd, &ev);
  return 0;
}

// Sends c.out from out_off; returns false on a hard error.
static bool flush_out(Conn& c) {
  while (c.out_off < c.out.size()) {
    ssize_t w = send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN) return true;
      return false;
    }
    c.out_off += (size_t)w;
  }
  return true;
}

static bool fill_in(Conn& c, bool* eof) {
  char buf[65536];
  *eof = false;
  for (;;) {
    ssize_t r = recv(c.fd, buf, sizeof buf, 0);
    if (r > 0) {
      c.rbuf.append(buf, (size_t)r);
      if ((size_t)r < sizeof buf) return true;
      continue;
    }
    if (r == 0) {
      *eof = true;
      return true;
    }
    if (errno == EAGAIN) return true;
    return false;
  }
}

static void fail(const char* what, int err) {
  fprintf(stderr, "storeload: %s: %s\n", what, strerror(err));
  exit(4);
}

// Blocking helper for setup: connect all, validate (modern), run a request and read its reply.
static void setup_send_recv(std::vector<Conn>& cs, const std::vector<std::string>& reqs,
                            const std::vector<std::string>& shapes) {
  size_t pending = 0;
  for (size_t i = 0; i < cs.size(); i++) {
    cs[i].out = reqs[i];
    cs[i].out_off = 0;
    cs[i].rbuf.clear();
    if (!flush_out(cs[i])) fail("setup send", errno);
    pending += shapes[i].empty() ? 0 : 1;
    cs[i].busy = !shapes[i].empty();
  }
  double deadline = now_s() + 60;
  std::vector<epoll_event> evs(1024);
  while (pending) {
    int n = epoll_wait(g_ep, evs.data(), (int)evs.size(), 1000);
    if (now_s() > deadline) {
      fprintf(stderr, "storeload: setup timed out (%zu pending)\n", pending);
      exit(5);
    }
    for (int k = 0; k < n; k++) {
      Conn& c = cs[evs[k].data.u32];
      if (evs[k].events & EPOLLOUT) {
        if (!flush_out(c)) fail("setup send", errno);
      }
      if (!c.busy) continue;
      bool eof;
      if (!fill_in(c, &eof)) fail("setup recv", errno);
      size_t used = parse_resp(shapes[c.idx], c.rbuf.data(), c.rbuf.size());
      if (used) {
        c.rbuf.erase(0, used);
        c.busy = false;
        pending--;
      } else if (eof) {
        fprintf(stderr, "storeload: server closed connection during setup\n");
        exit(5);
      }
    }
  }
}

static void connect_all(std::vector<Conn>& cs) {
  for (size_t i = 0; i < cs.size(); i++) {
    cs[i].idx = (int)i;
    if (open_conn(cs[i], (uint32_t)i) != 0) fail("connect", errno);
  }
  // wait until all writable (connected)
  size_t done = 0;
  std::vector<epoll_event> evs(1024);
  double deadline = now_s() + 60;
  while (done < cs.size()) {
    int n = epoll_wait(g_ep, evs.data(), (int)evs.size(), 1000);
    if (now_s() > deadline) fail("connect timeout", ETIMEDOUT);
    for (int k = 0; k < n; k++) {
      Conn& c = cs[evs[k].data.u32];
      if (c.connected) continue;
      int err = 0;
      socklen_t l = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &l);
      if (err) fail("connect", err);
      if (evs[k].events & EPOLLOUT) {
        c.connected = true;
        done++;
      }
    }
  }
}

static std::string validate_bytes() {
  std::string b;
  b += (char)0;
  uint32_t magic = 0x3C85F7CE;
  b.append((const char*)&magic, 4);
  b += (char)13;  // PING
  uint32_t nonce = (uint32_t)getpid();
  b.append((const char*)&nonce, 4);
  return b;
}

static std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t p = 0;
  while (p <= s.size()) {
    size_t q = s.find(',', p);
    if (q == std::string::npos) q = s.size();
    if (q > p) out.push_back(s.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

// ------------------------------------------------------------------ load mode

static int cmd_load(int argc, char** argv) {
  if (argc < 10) {
    fprintf(stderr, "usage: storeload load HOST PORT PROTO CLIENTS OPS SIZES WARMUP MEASURE\n");
    return 2;
  }
  Proto P(argv[4]);
  int nc = atoi(argv[5]);
  auto ops = split(argv[6]);
  auto sizes = split(argv[7]);
  double warm = atof(argv[8]), meas = atof(argv[9]);
  std::vector<Conn> cs(nc);
  connect_all(cs);
  const int MK = 8;  // keys per multi_get
  if (P.modern) {
    std::vector<std::string> r(nc, validate_bytes()), s(nc, "i");
    setup_send_recv(cs, r, s);
  }
  for (auto& op : ops) {
    bool sized = op == "set" || op == "get" || op == "cas" || op == "mget";
    std::vector<std::string> szs = sized ? sizes : std::vector<std::string>{"8"};
    if (op == "echo") szs = {"32"};
    for (auto& szs_i : szs) {
      size_t sz = (size_t)atol(szs_i.c_str());
      std::string val(sz, 'v');
      std::vector<Req> reqs(nc);
      // populate: per-client keys; SET is followed by CHECK to know it landed
      std::vector<std::string> pre(nc), pshape(nc);
      for (int i = 0; i < nc; i++) {
        std::string key = "/b3/" + op + "/" + std::to_string(sz) + "/c" + std::to_string(i);
        std::vector<std::string> mkeys;
        std::string& b = pre[i];
        if (op == "mget") {
          for (int k = 0; k < MK; k++) {
            mkeys.push_back(key + "/m" + std::to_string(k));
            b += (char)P.SET;
            put_str(b, mkeys.back());
            put_str(b, val);
          }
        } else if (op == "add") {
          // nothing: missing key counts as 0
        } else if (!P.echo) {
          b += (char)P.SET;
          put_str(b, key);
          put_str(b, op == "wait" ? std::string("1") : val);
        }
        if (!P.echo) {
          b += (char)P.CHECK;
          put_u64(b, 1);
          put_str(b, op == "mget" ? mkeys.back() : key);
          pshape[i] = "b";
        }
        reqs[i] = make_req(P, op, key, val, MK, mkeys);
      }
      if (!P.echo) setup_send_recv(cs, pre, pshape);
      // closed loop
      std::vector<float> lat;
      lat.reserve(1 << 20);
      long done_meas = 0;
      double t_start = now_s(), t_meas = t_start + warm, t_end = t_meas + meas;
      bool measuring = false;
      uint64_t meas_ns0 = 0, meas_ns1 = 0;
      for (auto& c : cs) {
        c.out = reqs[c.idx].bytes;
        c.out_off = 0;
        c.rbuf.clear();
        c.t_send = now_ns();
        c.busy = true;
        if (!flush_out(c)) fail("send", errno);
      }
      std::vector<epoll_event> evs(4096);
      bool stopping = false;
      long outstanding = nc;
      while (outstanding > 0) {
        int n = epoll_wait(g_ep, evs.data(), (int)evs.size(), 1000);
        double t = now_s();
        if (!measuring && t >= t_meas && !stopping) {
          measuring = true;
          meas_ns0 = now_ns();
        }
        if (!stopping && t >= t_end) {
          stopping = true;
          meas_ns1 = now_ns();
        }
        for (int k = 0; k < n; k++) {
          Conn& c = cs[evs[k].data.u32];
          if ((evs[k].events & EPOLLOUT) && c.out_off < c.out.size()) {
            if (!flush_out(c)) fail("send", errno);
          }
          if (!(evs[k].events & (EPOLLIN | EPOLLERR | EPOLLHUP))) continue;
          bool eof;
          if (!fill_in(c, &eof)) fail("recv", errno);
          for (;;) {
            if (!c.busy) break;
            size_t used = parse_resp(reqs[c.idx].shape, c.rbuf.data(), c.rbuf.size());
            if (!used) {
              if (eof) {
                fprintf(stderr, "storeload: server closed a connection (op %s)\n", op.c_str());
                exit(6);
              }
              break;
            }
            c.rbuf.erase(0, used);
            uint64_t tn = now_ns();
            if (measuring && !stopping) {
              lat.push_back((float)((tn - c.t_send) / 1000.0));
              done_meas++;
            }
            if (stopping) {
              c.busy = false;
              outstanding--;
              break;
            }
            c.out_off = 0;
            c.t_send = tn;
            if (!flush_out(c)) fail("send", errno);
          }
        }
      }
      double secs = (meas_ns1 - meas_ns0) / 1e9;
      std::sort(lat.begin(), lat.end());
      auto q = [&](double p) -> double {
        if (lat.empty()) return -1;
        size_t i = (size_t)(p * (lat.size() - 1) + 0.5);
        return lat[std::min(i, lat.size() - 1)];
      };
      printf(
          "{\"op\": \"%s\", \"size\": %zu, \"clients\": %d, \"ops\": %ld, \"secs\": %.4f, "
          "\"ops_per_s\": %.1f, \"p50_us\": %.2f, \"p99_us\": %.2f, \"max_us\": %.2f, "
          "\"errors\": %ld}\n",
          op.c_str(), sz, nc, done_meas, secs, secs > 0 ? done_meas / secs : 0.0, q(0.5), q(0.99),
          lat.empty() ? -1.0 : (double)lat.back(), g_errors);
      fflush(stdout);
    }
  }
  for (auto& c : cs) close(c.fd);
  return 0;
}

// ------------------------------------------------------------------ storm mode
//
// The N clients are spread over PROCS forked processes (perf.md B4: >= 4, so that one
// process's serial socket()+connect() calls and fd limit are not what is measured). Each
// process opens its share of the connections when the gang opens phase 0 and runs barrier
// round r when it opens phase r+1, so every phase starts in all processes together.
// connect_ms = earliest first socket() -> last client's first reply, over all processes;
// established_ms = the same up to the last TCP handshake seen by a client; round r =
// earliest first ADD -> last STOP_WAITING, over all processes.

static constexpr int kMaxStormRounds = 64;

// One process's results, in the gang's shared memory.
struct StormSlot {
  double t_first_connect;  // before this process's first socket()
  double t_established;    // its last connection's handshake completed
  double t_ready;          // its last connection got its first reply
  long resets, retries, ready;
  double round_start[kMaxStormRounds], round_end[kMaxStormRounds];
};

static constexpr double kStormPhaseTimeoutS = 120;

// Runs nloc of the N clients in this process. Returns 0 or an exit code.
static int storm_client(const Proto& P, int N, int nloc, int rounds, const std::string& tag,
                        ProcessGang& gang, StormSlot& out) {
  g_ep = epoll_create1(EPOLL_CLOEXEC);  // the parent's epoll instance is shared after fork
  if (g_ep < 0) fail("epoll_create1", errno);
  std::vector<Conn> cs(nloc);
  // First round trip: modern VALIDATE+PING, legacy ADD(init key, 1) (what the 1.13 client
  // sends first).
  std::string init_key = "/b4/" + tag + "/init";
  std::string first, first_shape;
  if (P.modern) {
    first = validate_bytes();
    first_shape = "i";
  } else {
    first += (char)P.ADD;
    put_str(first, init_key);
    put_u64(first, 1);
    first_shape = "q";
  }
  std::vector<epoll_event> evs(4096);
  if (!gang.ChildAwait(0, kStormPhaseTimeoutS)) {
    fprintf(stderr, "storeload: storm: connect phase never opened\n");
    return 7;
  }
  double t0 = now_s();
  out.t_first_connect = t0;
  for (int i = 0; i < nloc; i++) {
    cs[i].idx = i;
    cs[i].state = 0;  // 0 connecting, 1 awaiting first reply, 2 ready
    while (open_conn(cs[i], (uint32_t)i) != 0) {
      g_retries++;
      usleep(1000);
    }
    cs[i].out = first;
  }
  int ready = 0, established = 0;
  double deadline = t0 + kStormPhaseTimeoutS;
  while (ready < nloc) {
    int n = epoll_wait(g_ep, evs.data(), (int)evs.size(), 1000);
    if (n < 0 && errno != EINTR) fail("epoll_wait", errno);
    if (now_s() > deadline) {
      fprintf(stderr, "storeload: storm connect phase timed out (%d/%d ready)\n", ready, nloc);
      out.ready = ready;
      out.resets = g_resets;
      out.retries = g_retries;
      return 7;
    }
    for (int k = 0; k < n; k++) {
      Conn& c = cs[evs[k].data.u32];
      auto reconnect = [&](int err) {
        if (err == ECONNRESET || err == EPIPE || err == ECONNREFUSED) g_resets++;
        g_retries++;
        if (c.state == 1) established--;
        epoll_ctl(g_ep, EPOLL_CTL_DEL, c.fd, nullptr);
        close(c.fd);
        while (open_conn(c, (uint32_t)c.idx) != 0) usleep(1000);
        c.state = 0;
      };
      if (c.state == 0) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err) {
          reconnect(err);
          continue;
        }
        if (!(evs[k].events & EPOLLOUT)) continue;
        c.state = 1;
        if (++established == nloc) out.t_established = now_s();
        c.out_off = 0;
        if (!flush_out(c)) {
          reconnect(errno);
          continue;
        }
      }
      if (c.state == 1) {
        if ((evs[k].events & EPOLLOUT) && c.out_off < c.out.size() && !flush_out(c)) {
          reconnect(errno);
          continue;
        }
        bool eof;
        if (!fill_in(c, &eof)) {
          reconnect(errno);
          continue;
        }
        size_t used = parse_resp(first_shape, c.rbuf.data(), c.rbuf.size());
        if (used) {
          c.rbuf.erase(0, used);
          c.state = 2;
          ready++;
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.u32 = (uint32_t)c.idx;
          epoll_ctl(g_ep, EPOLL_CTL_MOD, c.fd, &ev);
        } else if (eof) {
          reconnect(ECONNRESET);
        }
      }
    }
  }
  out.t_ready = now_s();
  out.ready = ready;
  out.resets = g_resets;
  out.retries = g_retries;
  // Barrier rounds: state 10 = awaiting ADD reply, 11 = awaiting STOP_WAITING, 12 = done.
  for (int r = 0; r < rounds; r++) {
    std::string key = "/b4/" + tag + "/barrier" + std::to_string(r);
    std::string done_key = key + "/last_worker";
    std::string add;
    add += (char)P.ADD;
    put_str(add, key);
    put_u64(add, 1);
    std::string wait_only;
    wait_only += (char)P.WAIT;
    put_u64(wait_only, 1);
    put_str(wait_only, done_key);
    std::string set_wait;
    set_wait += (char)P.SET;
    put_str(set_wait, done_key);
    put_str(set_wait, "1");
    set_wait += wait_only;
    if (!gang.ChildAwait(r + 1, kStormPhaseTimeoutS)) {
      fprintf(stderr, "storeload: storm: barrier round %d never opened\n", r);
      return 8;
    }
    double rs = now_s();
    out.round_start[r] = rs;
    for (auto& c : cs) {
      c.out = add;
      c.out_off = 0;
      c.state = 10;
      if (!flush_out(c)) fail("barrier send", errno);
    }
    int finished = 0;
    double rdl = rs + kStormPhaseTimeoutS;
    while (finished < nloc) {
      int n = epoll_wait(g_ep, evs.data(), (int)evs.size(), 1000);
      if (n < 0 && errno != EINTR) fail("epoll_wait", errno);
      if (now_s() > rdl) {
        fprintf(stderr, "storeload: barrier round %d timed out (%d/%d)\n", r, finished, nloc);
        return 8;
      }
      for (int k = 0; k < n; k++) {
        Conn& c = cs[evs[k].data.u32];
        bool eof;
        if (!fill_in(c, &eof)) {
          g_resets++;
          fail("barrier recv", errno);
        }
        for (;;) {
          if (c.state == 10) {
            if (c.rbuf.size() < 8) break;
            int64_t v;
            memcpy(&v, c.rbuf.data(), 8);
            c.rbuf.erase(0, 8);
            c.out = v >= N ? set_wait : wait_only;
            c.out_off = 0;
            c.state = 11;
            if (!flush_out(c)) fail("barrier send", errno);
            if (c.out_off < c.out.size()) {
              fprintf(stderr, "storeload: short send in barrier\n");
              return 9;
            }
          } else if (c.state == 11) {
            if (c.rbuf.size() < 1) break;
            c.rbuf.erase(0, 1);
            c.state = 12;
            finished++;
          } else {
            break;
          }
        }
        if (eof && c.state != 12) {
          g_resets++;
          fprintf(stderr, "storeload: server closed a connection in barrier\n");
          return 8;
        }
      }
    }
    out.round_end[r] = now_s();
    out.resets = g_resets;
  }
  for (auto& c : cs) close(c.fd);
  return 0;
}

static int cmd_storm(int argc, char** argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: storeload storm HOST PORT PROTO N ROUNDS TAG [PROCS]\n");
    return 2;
  }
  Proto P(argv[4]);
  int N = atoi(argv[5]);
  int rounds = atoi(argv[6]);
  std::string tag = argv[7];
  int procs = argc > 8 ? atoi(argv[8]) : 1;
  if (N < 1 || rounds < 0 || rounds > kMaxStormRounds || procs < 1 || procs > N) {
    fprintf(stderr, "storeload: storm: need N >= PROCS >= 1 and 0 <= ROUNDS <= %d\n",
            kMaxStormRounds);
    return 2;
  }
  ProcessGang gang(procs, rounds + 1, sizeof(StormSlot));
  int me = gang.Fork();
  if (me >= 0) {
    int nloc = N / procs + (me < N % procs ? 1 : 0);
    auto& slot = *static_cast<StormSlot*>(gang.slot(me));
    int rc = storm_client(P, N, nloc, rounds, tag, gang, slot);
    if (rc == 0) gang.ChildDone();
    exit(rc);
  }
  bool ok = true;
  for (int k = 0; k <= rounds && ok; k++) ok = gang.OpenPhase(k, 2 * kStormPhaseTimeoutS);
  if (!ok) gang.KillAll();  // the others would wait for a phase that never opens
  ok = gang.Finish(2 * kStormPhaseTimeoutS) && ok;
  std::vector<StormSlot*> s;
  for (int i = 0; i < procs; i++) s.push_back(static_cast<StormSlot*>(gang.slot(i)));
  long ready = 0, resets = 0, retries = 0;
  double t0 = 1e300, t_est = 0, t_ready = 0;
  for (auto* x : s) {
    ready += x->ready;
    resets += x->resets;
    retries += x->retries;
    t0 = std::min(t0, x->t_first_connect);
    t_est = std::max(t_est, x->t_established);
    t_ready = std::max(t_ready, x->t_ready);
  }
  if (!ok) {
    fprintf(stderr, "storeload: storm failed: %s\n", gang.error());
    printf(
        "{\"n\": %d, \"procs\": %d, \"connect_ms\": null, \"ready\": %ld, \"resets\": %ld, "
        "\"retries\": %ld}\n",
        N, procs, ready, resets, retries);
    return 7;
  }
  printf(
      "{\"n\": %d, \"procs\": %d, \"connect_ms\": %.3f, \"established_ms\": %.3f, "
      "\"ready\": %ld, \"resets\": %ld, \"retries\": %ld, \"round_ms\": [",
      N, procs, (t_ready - t0) * 1e3, (t_est - t0) * 1e3, ready, resets, retries);
  for (int r = 0; r < rounds; r++) {
    double rs = 1e300, re = 0;
    for (auto* x : s) {
      rs = std::min(rs, x->round_start[r]);
      re = std::max(re, x->round_end[r]);
    }
    printf("%s%.3f", r ? ", " : "", (re - rs) * 1e3);
  }
  printf("]}\n");
  fflush(stdout);
  return 0;
}

// ------------------------------------------------------------------ echo server

static int cmd_echo_server() {
  int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(ls, (sockaddr*)&a, sizeof a) != 0 || listen(ls, -1) != 0) {
    perror("bind/listen");
    return 3;
  }
  socklen_t l = sizeof a;
  getsockname(ls, (sockaddr*)&a, &l);
  printf("PORT %d\n", ntohs(a.sin_port));
  fflush(stdout);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = ls;
  epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
  std::vector<epoll_event> evs(4096);
  char buf[65536];
  for (;;) {
    int n = epoll_wait(ep, evs.data(), (int)evs.size(), -1);
    for (int k = 0; k < n; k++) {
      int fd = evs[k].data.fd;
      if (fd == ls) {
        for (;;) {
          int c = accept4(ls, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (c < 0) break;
          setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event e{};
          e.events = EPOLLIN;
          e.data.fd = c;
          epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
        }
        continue;
      }
      ssize_t r = recv(fd, buf, sizeof buf, 0);
      if (r <= 0) {
        if (r == 0 || errno != EAGAIN) close(fd);
        continue;
      }
      ssize_t off = 0;
      while (off < r) {  // echo replies are tiny; blocking-ish retry is fine here
        ssize_t w = send(fd, buf + off, (size_t)(r - off), MSG_NOSIGNAL);
        if (w < 0) {
          if (errno == EAGAIN) continue;
          break;
        }
        off += w;
      }
    }
  }
}

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  raise_nofile();
  if (argc < 2) {
    fprintf(stderr, "usage: storeload echo-server | load ... | storm ...\n");
    return 2;
  }
  std::string mode = argv[1];
  if (mode == "echo-server") return cmd_echo_server();
  if (argc < 4) return 2;
  g_ep = epoll_create1(EPOLL_CLOEXEC);
  g_addr.sin_family = AF_INET;
  g_addr.sin_port = htons((uint16_t)atoi(argv[3]));
  inet_pton(AF_INET, argv[2], &g_addr.sin_addr);
  if (mode == "load") return cmd_load(argc, argv);
  if (mode == "storm") return cmd_storm(argc, argv);
  fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}

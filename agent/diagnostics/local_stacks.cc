#include "agent/diagnostics/local_stacks.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "nlohmann/json.hpp"

namespace muster {
namespace {

constexpr char kLocalStacksPrefix[] = "muster-stacks/";
// Requests not yet read when another arrives past this many: the oldest is dropped.
constexpr size_t kMaxWaiting = 16;

// The address of the abstract name `name`, and its length for bind/connect.
socklen_t LocalStacksAddress(const std::string& name, sockaddr_un* addr) {
  *addr = {};
  addr->sun_family = AF_UNIX;
  size_t n = std::min(name.size(), sizeof(addr->sun_path) - 1);
  std::memcpy(addr->sun_path + 1, name.data(), n);  // sun_path[0] = 0: abstract
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + n);
}

nlohmann::json LocalRanksJson(const std::vector<rdzv::RankStack>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (const rdzv::RankStack& r : ranks) {
    out.push_back({{"rank", r.rank},
                   {"local_rank", r.local_rank},
                   {"pid", r.pid},
                   {"text", r.text},
                   {"unavailable", r.unavailable}});
  }
  return out;
}

// Writes all of `data` to blocking `fd` (its SO_SNDTIMEO bounds each write).
void SendAnswer(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;  // a signal arrived; nothing was sent
    if (n <= 0) return;                     // the client left or stopped reading
    done += static_cast<size_t>(n);
  }
}

bool PeerMayAsk(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  return cred.uid == 0 || cred.uid == getuid();
}

// The agent answers only its own user or root (PeerMayAsk) and closes on anyone else:
// that is told here, from the agent's credentials on the connected socket, instead of
// reading as an agent that did not answer.
absl::Status CheckMayAsk(int fd, const LocalAgent& agent) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return ErrnoStatus("getsockopt(SO_PEERCRED)", errno);
  }
  const uid_t self = geteuid();
  if (self == 0 || cred.uid == self) return absl::OkStatus();
  std::string user = absl::StrCat("uid ", cred.uid);
  passwd entry{};
  passwd* found = nullptr;
  char names[1024];
  if (getpwuid_r(cred.uid, &entry, names, sizeof names, &found) == 0 && found != nullptr) {
    user = absl::StrCat(found->pw_name, " (uid ", cred.uid, ")");
  }
  const std::string run_as = found == nullptr ? absl::StrCat("uid ", cred.uid) : found->pw_name;
  return absl::PermissionDeniedError(
      absl::StrCat("agent pid ", agent.pid, " of job ", agent.run_id, " runs as ", user,
                   " and this is uid ", self,
                   ": only its user or root may ask for its stacks (the request signals its "
                   "workers); run muster stacks as ",
                   run_as, cred.uid == 0 ? "" : " or as root"));
}

}  // namespace

std::string LocalStacksName(const std::string& run_id, pid_t pid) {
  return absl::StrCat(kLocalStacksPrefix, run_id, "/", pid);
}

absl::StatusOr<std::unique_ptr<LocalStacksServer>> LocalStacksServer::Start(
    EventLoop* loop, const std::string& run_id, const std::string& host, Collect collect) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  sockaddr_un addr;
  std::string name = LocalStacksName(run_id, getpid());
  socklen_t len = LocalStacksAddress(name, &addr);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return ErrnoStatus("bind @" + name, errno);
  }
  if (listen(fd.get(), 8) != 0) return ErrnoStatus("listen @" + name, errno);
  std::unique_ptr<LocalStacksServer> server(new LocalStacksServer(loop, host, std::move(collect)));
  LocalStacksServer* self = server.get();
  ASSIGN_OR_RETURN(self->acceptor_,
                   Acceptor::Start(loop, std::move(fd), {.what = "muster stacks socket"},
                                   [self](UniqueFd socket, const sockaddr_storage&) {
                                     self->Accepted(std::move(socket));
                                   }));
  return server;
}

LocalStacksServer::LocalStacksServer(EventLoop* loop, std::string host, Collect collect)
    : loop_(loop), host_(std::move(host)), collect_(std::move(collect)) {}

LocalStacksServer::~LocalStacksServer() {
  acceptor_.reset();  // stops listening first
  for (int fd : waiting_) {
    loop_->Remove(fd);
    close(fd);
  }
}

// Out of descriptors, the acceptor rests instead of waking the loop again at once (it spun
// here before); the client then times out.
void LocalStacksServer::Accepted(UniqueFd socket) {
  if (!PeerMayAsk(socket.get())) return;
  const int fd = socket.get();
  if (!loop_->Add(fd, EPOLLIN, [this, fd](uint32_t) { Answer(fd); }).ok()) return;
  waiting_.push_back(socket.release());
  if (waiting_.size() > kMaxWaiting) {  // a client that connects and says nothing
    loop_->Remove(waiting_.front());
    close(waiting_.front());
    waiting_.erase(waiting_.begin());
  }
}

void LocalStacksServer::Answer(int fd) {
  char buf[64];
  ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;  // not yet: wait for more
  loop_->Remove(fd);
  std::erase(waiting_, fd);
  auto conn = std::make_shared<UniqueFd>(fd);
  int64_t ms = 0;
  std::string request(buf, n > 0 ? static_cast<size_t>(n) : 0);
  std::vector<std::string> words = absl::StrSplit(request, absl::ByAnyChar(" \n"));
  if (words.size() < 2 || words[0] != "stacks" || !absl::SimpleAtoi(words[1], &ms) || ms <= 0) {
    return;  // not our client: closing is the answer
  }
  // Blocking from here on, each write bounded: the answer goes out from the collector's
  // thread, which must not wait forever on a client that stopped reading.
  timeval bound{.tv_sec = 2, .tv_usec = 0};
  if (fcntl(fd, F_SETFL, 0) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound) != 0) {
    return;
  }
  collect_(absl::Milliseconds(std::min<int64_t>(ms, 60000)),
           [conn, host = host_](std::vector<rdzv::RankStack> ranks) {
             nlohmann::json doc = {{"host", host}, {"ranks", LocalRanksJson(ranks)}};
             SendAnswer(conn->get(), doc.dump());
           });
}

std::vector<LocalAgent> FindLocalAgents() {
  // "Num RefCount Protocol Flags Type St Inode Path": a listener has __SO_ACCEPTCON
  // (0x10000) in Flags; an abstract Path starts with '@'.
  std::ifstream unix_sockets("/proc/net/unix");
  std::set<std::string> names;
  std::string line;
  std::getline(unix_sockets, line);  // the header
  while (std::getline(unix_sockets, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint32_t flags = 0;
    if (f.size() < 8 || !absl::SimpleHexAtoi(f[3], &flags) || !(flags & 0x10000)) continue;
    if (f[7].rfind(absl::StrCat("@", kLocalStacksPrefix), 0) == 0) names.insert(f[7].substr(1));
  }
  std::vector<LocalAgent> agents;
  for (const std::string& name : names) {
    std::string rest = name.substr(sizeof(kLocalStacksPrefix) - 1);
    size_t slash = rest.rfind('/');
    int pid = 0;
    if (slash == std::string::npos || !absl::SimpleAtoi(rest.substr(slash + 1), &pid)) continue;
    agents.push_back({.run_id = rest.substr(0, slash), .pid = pid});
  }
  return agents;
}

namespace {

// Reads `fd` to its end (the agent closes after its answer), by `deadline`.
absl::StatusOr<std::string> ReadLocalAnswer(int fd, absl::Time deadline, pid_t agent) {
  std::string answer;
  for (;;) {
    int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    int ready = left > 0 ? poll(&p, 1, static_cast<int>(left) + 1) : 0;
    if (ready < 0 && errno == EINTR) continue;  // a signal arrived; wait again
    if (ready <= 0) {
      return absl::DeadlineExceededError(
          absl::StrCat("agent pid ", agent, " did not answer in time"));
    }
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return answer;  // the agent closed: the answer is complete
    answer.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<rdzv::NodeStacks> LocalNodeFromAnswer(const std::string& answer, pid_t agent) {
  nlohmann::json doc = nlohmann::json::parse(answer, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("ranks") || !doc["ranks"].is_array()) {
    return absl::UnavailableError(absl::StrCat("agent pid ", agent, " closed without an answer"));
  }
  rdzv::NodeStacks node{.node_id = absl::StrCat("pid ", agent), .host = doc.value("host", "")};
  for (const nlohmann::json& r : doc["ranks"]) {
    if (!r.is_object()) continue;
    node.ranks.push_back({.rank = r.value("rank", 0),
                          .local_rank = r.value("local_rank", 0),
                          .pid = r.value("pid", 0),
                          .text = r.value("text", ""),
                          .unavailable = r.value("unavailable", "")});
  }
  return node;
}

}  // namespace

absl::StatusOr<rdzv::NodeStacks> AskLocalAgent(const LocalAgent& agent, absl::Duration collect) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus("socket(AF_UNIX)", errno);
  sockaddr_un addr;
  std::string name = LocalStacksName(agent.run_id, agent.pid);
  socklen_t len = LocalStacksAddress(name, &addr);
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
    return absl::UnavailableError(absl::StrCat("connect @", name, ": ", strerror(errno)));
  }
  RETURN_IF_ERROR(CheckMayAsk(fd.get(), agent));
  std::string request = absl::StrCat("stacks ", absl::ToInt64Milliseconds(collect), "\n");
  if (send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("send to @", name, ": ", strerror(errno)));
  }
  ASSIGN_OR_RETURN(std::string answer,
                   ReadLocalAnswer(fd.get(), absl::Now() + collect + absl::Seconds(2), agent.pid));
  return LocalNodeFromAnswer(answer, agent.pid);
}

}  // namespace muster

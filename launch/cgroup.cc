#include "launch/cgroup.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "launch/pidfd.h"
#include "spdlog/spdlog.h"

namespace muster {
namespace {

// Small files only (cgroup.events, cgroup.procs of one leaf). Async-signal-safe.
ssize_t ReadInto(const char* path, char* buf, size_t size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t total = 0, n;
  while (static_cast<size_t>(total) < size - 1 &&
         ((n = read(fd, buf + total, size - 1 - total)) > 0 || (n < 0 && errno == EINTR))) {
    if (n > 0) total += n;
  }
  close(fd);
  buf[total] = '\0';
  return total;
}

bool WriteString(const char* path, const char* text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == static_cast<ssize_t>(strlen(text));
}

// `dir` + "/" + `name` into `out` (PATH_MAX bytes). Async-signal-safe.
const char* Join(char* out, const char* dir, const char* name) {
  size_t d = strlen(dir), n = strlen(name);
  if (d + n + 2 > PATH_MAX) return "";
  memcpy(out, dir, d);
  out[d] = '/';
  memcpy(out + d + 1, name, n + 1);
  return out;
}

bool EventsSayPopulated(const char* dir) {
  char path[PATH_MAX], buf[256];
  if (ReadInto(Join(path, dir, "cgroup.events"), buf, sizeof(buf)) <= 0) return false;
  return strstr(buf, "populated 1") != nullptr;
}

// Deeper than this, sub-cgroups are neither signalled one by one (cgroup.kill still reaches
// them) nor removed (cgroup.max.depth is unlimited by default; each level costs RemoveTree
// a frame of some 8 KiB).
constexpr int kMaxRemoveDepth = 64;

// rmdir of every sub-cgroup of `dir`, depth first (a worker may have made cgroups below its
// attempt's leaf), then of `dir`. Async-signal-safe (getdents64, no opendir). True when
// `dir` is gone.
bool RemoveTree(const char* dir, int depth = 0) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  alignas(8) char buf[4096];
  long n;
  while (depth < kMaxRemoveDepth && (n = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
    for (long off = 0; off < n;) {
      struct Entry {
        ino64_t ino;
        off64_t off;
        unsigned short reclen;
        unsigned char type;
        char name[1];
      };
      const Entry* e = reinterpret_cast<const Entry*>(buf + off);
      off += e->reclen;
      if (e->type != DT_DIR || e->name[0] == '.') continue;
      char path[PATH_MAX];
      RemoveTree(Join(path, dir, e->name), depth + 1);
    }
  }
  close(fd);
  return rmdir(dir) == 0 || errno == ENOENT;
}

// `dir` and every cgroup below it (down to kMaxRemoveDepth levels), parents before children
// (not async-signal-safe).
void ListCgroupTree(const std::string& dir, std::vector<std::string>* out, int depth = 0) {
  out->push_back(dir);
  if (depth >= kMaxRemoveDepth) return;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (dirent* e = readdir(d)) {
    if (e->d_type == DT_DIR && e->d_name[0] != '.') {
      ListCgroupTree(absl::StrCat(dir, "/", e->d_name), out, depth + 1);
    }
  }
  closedir(d);
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// "/muster-12/a1" style path of `dir` relative to the cgroup2 root, as /proc/PID/cgroup
// shows it, given our own pair (dir, relative).
struct CgroupPlace {
  std::string dir;          // in the file system
  std::string relative;     // as /proc/self/cgroup writes it
  std::string mount;        // where the cgroup2 file system is mounted
  bool nsdelegate = false;  // mounted with nsdelegate: cgroup namespaces bound migrations
};

absl::StatusOr<CgroupPlace> OwnCgroup() {
  std::string self = ReadFileOrEmpty("/proc/self/cgroup");
  std::string relative;
  for (absl::string_view line : absl::StrSplit(self, '\n')) {
    if (absl::StartsWith(line, "0::")) relative = std::string(line.substr(3));
  }
  if (relative.empty()) return absl::NotFoundError("no cgroup v2 entry in /proc/self/cgroup");
  std::string mountinfo = ReadFileOrEmpty("/proc/self/mountinfo");
  for (absl::string_view line : absl::StrSplit(mountinfo, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
    size_t dash = 0;
    while (dash < f.size() && f[dash] != "-") ++dash;
    if (dash + 1 >= f.size() || f[dash + 1] != "cgroup2" || f.size() < 5) continue;
    std::string root(f[3]), mount(f[4]);
    if (root == "/") root.clear();
    if (relative.compare(0, root.size(), root) != 0) continue;  // not visible from here
    std::string rest = relative.substr(root.size());
    if (rest == "/") rest.clear();
    bool nsdelegate = false;
    if (dash + 3 < f.size()) {
      for (absl::string_view option : absl::StrSplit(f[dash + 3], ',')) {
        nsdelegate = nsdelegate || option == "nsdelegate";
      }
    }
    return CgroupPlace{mount + rest, relative == "/" ? "" : relative, mount, nsdelegate};
  }
  return absl::NotFoundError("no cgroup2 file system mounted (/proc/self/mountinfo)");
}

// Whether the calling process holds CAP_SYS_ADMIN (effective), in whatever user namespace.
bool HasCapSysAdmin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32))) != 0;
}

// Whether the user namespace that owns the calling process's cgroup namespace is its own
// (NS_GET_USERNS): holding CAP_SYS_ADMIN, it may then setns(2) into any cgroup namespace of
// that user namespace, the agent's included.
bool OwnsItsCgroupNamespace() {
  UniqueFd cgroup_ns(open("/proc/self/ns/cgroup", O_RDONLY | O_CLOEXEC));
  if (!cgroup_ns.valid()) return true;  // cannot tell: assume the worst
  UniqueFd owner(ioctl(cgroup_ns.get(), NS_GET_USERNS));
  struct stat owner_st, own_st;
  if (!owner.valid() || fstat(owner.get(), &owner_st) != 0 ||
      stat("/proc/self/ns/user", &own_st) != 0) {
    return errno != EPERM;  // EPERM: the owner is outside our user namespace
  }
  return owner_st.st_ino == own_st.st_ino && owner_st.st_dev == own_st.st_dev;
}

// How a worker (the agent's credentials) could leave its attempt's cgroup, or "" when the
// kernel stops it. Moving a process needs write access to cgroup.procs of the lowest
// cgroup above both places (cgroup_procs_write_permission); with nsdelegate both must also
// lie in the mover's cgroup namespace, which for workers is rooted at their leaf.
std::string EscapeRoute(const CgroupPlace& own, const std::string& job, bool namespaced) {
  if (namespaced) {
    // They hold the agent's CAP_SYS_ADMIN (which unsharing needed).
    if (!OwnsItsCgroupNamespace()) return "";
    return "CAP_SYS_ADMIN in the user namespace that owns the agent's cgroup namespace: they "
           "can setns(2) into it (/proc/<agent pid>/ns/cgroup) and move from there";
  }
  // The highest cgroup above the leaf whose cgroup.procs the workers may write: the job
  // cgroup (the agent's own) at least.
  std::string writable = job;
  for (std::string dir = own.dir;; dir = dir.substr(0, dir.rfind('/'))) {
    if (faccessat(AT_FDCWD, (dir + "/cgroup.procs").c_str(), W_OK, AT_EACCESS) == 0) {
      writable = dir;
    }
    if (dir.size() <= own.mount.size() || dir.rfind('/') == std::string::npos) break;
  }
  return absl::StrCat(
      "write access to ", writable, "/cgroup.procs (a cgroup above theirs; workers run as uid ",
      geteuid(), ", ", geteuid() == 0 ? "its owner" : "which owns or may write it",
      "), and cgroup2 is not mounted with nsdelegate",
      own.nsdelegate ? " or muster cannot unshare a cgroup namespace (no CAP_SYS_ADMIN)" : "");
}

}  // namespace

absl::StatusOr<std::string> OwnCgroupDir() {
  absl::StatusOr<CgroupPlace> place = OwnCgroup();
  if (!place.ok()) return place.status();
  return place->dir;
}

int RemoveStaleJobCgroups(const std::string& dir, absl::Duration min_age) {
  int removed = 0;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return 0;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, "muster-", 7) != 0) continue;
    std::string path = absl::StrCat(dir, "/", e->d_name);
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat st;
    // Held: its agent lives. Young (min_age): its agent may be between mkdir and flock.
    if (!fd.valid() || flock(fd.get(), LOCK_EX | LOCK_NB) != 0 || fstat(fd.get(), &st) != 0 ||
        absl::Now() - absl::FromUnixSeconds(std::max(st.st_mtime, st.st_ctime)) < min_age) {
      continue;
    }
    if (KillAndRemoveCgroupTree(path.c_str(), 1000)) ++removed;
  }
  closedir(d);
  return removed;
}

namespace {

// Makes <dir>/muster-<pid>-<random> (agents in different PID namespaces may share a cgroup
// and a pid: the random suffix) and holds its flock. Another agent's sweep
// (RemoveStaleJobCgroups) may take the directory between its mkdir and its flock: it is then
// made again under a new name. Returns its name and the locked fd.
absl::StatusOr<std::pair<std::string, UniqueFd>> MakeLockedJobDir(const std::string& dir) {
  for (int attempt = 1;; ++attempt) {
    uint32_t salt = 0;
    if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt))
      salt = static_cast<uint32_t>(time(nullptr)) + attempt;
    std::string name = absl::StrCat("muster-", getpid(), "-", absl::Hex(salt));
    std::string path = absl::StrCat(dir, "/", name);
    if (mkdir(path.c_str(), 0755) != 0) return ErrnoStatus(absl::StrCat("mkdir ", path), errno);
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    struct stat held, now;
    if (fd.valid() && flock(fd.get(), LOCK_EX | LOCK_NB) == 0 && fstat(fd.get(), &held) == 0 &&
        stat(path.c_str(), &now) == 0 && held.st_ino == now.st_ino) {
      return std::make_pair(std::move(name), std::move(fd));
    }
    const int err = errno;  // ENOENT, EWOULDBLOCK: a sweep holds or removed it
    if (attempt == 5) return ErrnoStatus(absl::StrCat("flock ", path), err);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<JobCgroup>> JobCgroup::Create() {
  absl::StatusOr<CgroupPlace> own = OwnCgroup();
  if (!own.ok()) return own.status();
  // Left by agents killed together with their watchdogs (a whole pod's processes at once),
  // or before their watchdogs started. No agent holds its job cgroup unlocked: a fresh one
  // taken between its mkdir and its flock is made again (MakeLockedJobDir).
  if (int n = RemoveStaleJobCgroups(own->dir, absl::ZeroDuration()); n > 0) {
    spdlog::info("removed {} cgroup{} of agents that are gone", n, n == 1 ? "" : "s");
  }
  ASSIGN_OR_RETURN(auto made, MakeLockedJobDir(own->dir));
  std::unique_ptr<JobCgroup> cg(new JobCgroup(absl::StrCat(own->dir, "/", made.first)));
  cg->relative_ = absl::StrCat(own->relative, "/", made.first);
  cg->lock_ = std::move(made.second);
  if (access((cg->path_ + "/cgroup.kill").c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError("no cgroup.kill (kernel older than 5.14)");
  }
  cg->inotify_.reset(inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!cg->inotify_.valid()) return ErrnoStatus("inotify_init1", errno);
  if (absl::Status s = cg->BeginAttempt(); !s.ok()) return s;  // proves a leaf can be made
  // A cgroup namespace rooted at the leaf bounds a worker's migrations only where cgroup2
  // is mounted with nsdelegate; unsharing one needs CAP_SYS_ADMIN (in any user namespace).
  cg->namespaced_ = own->nsdelegate && HasCapSysAdmin();
  cg->escape_ = EscapeRoute(*own, cg->path_, cg->namespaced_);
  return cg;
}

JobCgroup::~JobCgroup() {
  procs_.reset();
  if (!path_.empty()) RemoveTree(path_.c_str());
}

absl::Status JobCgroup::BeginAttempt() {
  if (!leaf_.empty()) RemoveLeaf();
  std::string leaf = absl::StrCat(path_, "/a", next_leaf_++);
  if (mkdir(leaf.c_str(), 0755) != 0) return ErrnoStatus(absl::StrCat("mkdir ", leaf), errno);
  UniqueFd procs(open((leaf + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
  if (!procs.valid()) return ErrnoStatus(absl::StrCat("open ", leaf, "/cgroup.procs"), errno);
  if (inotify_add_watch(inotify_.get(), (leaf + "/cgroup.events").c_str(), IN_MODIFY) < 0) {
    return ErrnoStatus("inotify_add_watch cgroup.events", errno);
  }
  UniqueFd dir(open(leaf.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) return ErrnoStatus(absl::StrCat("open ", leaf), errno);
  leaf_ = std::move(leaf);
  procs_ = std::move(procs);
  leaf_dir_ = std::move(dir);
  return absl::OkStatus();
}

void JobCgroup::ConsumeWaitEvents() {
  alignas(inotify_event) char buf[4096];
  while (read(inotify_.get(), buf, sizeof(buf)) > 0) {
  }
}

bool JobCgroup::Populated() const { return !leaf_.empty() && EventsSayPopulated(leaf_.c_str()); }

void JobCgroup::Kill() {
  if (!leaf_.empty()) WriteString((leaf_ + "/cgroup.kill").c_str(), "1");
}

void JobCgroup::Signal(int sig) {
  if (leaf_.empty()) return;
  // Every process of the leaf and of the cgroups a worker made below it.
  std::vector<std::string> tree;
  ListCgroupTree(leaf_, &tree);
  // The v2 line; a hybrid host lists v1 hierarchies before it.
  const std::string want = absl::StrCat("\n0::", relative_, leaf_.substr(path_.size()));
  for (const std::string& cgroup : tree) {
    for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(cgroup + "/cgroup.procs"), '\n')) {
      pid_t pid = 0;
      if (!absl::SimpleAtoi(line, &pid) || pid <= 0) continue;
      UniqueFd fd(PidfdOpen(pid));
      if (!fd.valid()) continue;  // exited since
      // The pidfd holds the process the pid names now; still in our leaf or below, it is
      // ours.
      std::string where = "\n" + ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/cgroup"));
      size_t at = where.find(want);
      if (at == std::string::npos) continue;
      char next = at + want.size() < where.size() ? where[at + want.size()] : '\0';
      if (next != '\n' && next != '/') continue;  // a sibling leaf whose name starts alike
      PidfdSignal(fd.get(), sig);
    }
  }
}

std::vector<pid_t> JobCgroup::Procs() const {
  std::vector<pid_t> procs;
  if (leaf_.empty()) return procs;
  std::vector<std::string> tree;
  ListCgroupTree(leaf_, &tree);
  for (const std::string& cgroup : tree) {
    for (absl::string_view line : absl::StrSplit(ReadFileOrEmpty(cgroup + "/cgroup.procs"), '\n')) {
      pid_t pid = 0;
      if (absl::SimpleAtoi(line, &pid) && pid > 0) procs.push_back(pid);
    }
  }
  return procs;
}

bool JobCgroup::RemoveLeaf() {
  if (leaf_.empty()) return true;
  if (!RemoveTree(leaf_.c_str())) return false;
  procs_.reset();
  return true;
}

bool KillAndRemoveCgroupTree(const char* job_dir, int timeout_ms) {
  char path[PATH_MAX];
  if (!WriteString(Join(path, job_dir, "cgroup.kill"), "1")) return RemoveTree(job_dir);
  int in = inotify_init1(IN_CLOEXEC);
  if (in >= 0) inotify_add_watch(in, Join(path, job_dir, "cgroup.events"), IN_MODIFY);
  // cgroup.kill is synchronous for signalling but the processes take a moment to exit.
  for (int waited = 0; EventsSayPopulated(job_dir) && waited < timeout_ms; waited += 100) {
    pollfd p{in, POLLIN, 0};
    if (in < 0 || poll(&p, 1, 100) < 0) break;
    alignas(inotify_event) char buf[1024];
    if (p.revents & POLLIN) {
      [[maybe_unused]] ssize_t n = read(in, buf, sizeof(buf));
    }
  }
  if (in >= 0) close(in);
  return RemoveTree(job_dir);
}

}  // namespace muster

#include "launch/sysfs_topology.h"

#include <dirent.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "launch/cpu_topology.h"

namespace muster {

SysfsTopology SysfsTopology::InMemory(std::map<std::string, std::string> files) {
  SysfsTopology topology("(memory)");
  topology.files_ = std::move(files);
  return topology;
}

absl::StatusOr<std::string> SysfsTopology::ReadLine(const std::string& relative) const {
  std::string path = absl::StrCat(root_, "/", relative);
  std::string line;
  if (files_) {
    auto it = files_->find(relative);
    if (it == files_->end()) return ErrnoStatus(absl::StrCat("open ", path), ENOENT);
    line = it->second.substr(0, it->second.find('\n'));
  } else {
    std::ifstream in(path);
    if (!in) return ErrnoStatus(absl::StrCat("open ", path), errno);
    std::getline(in, line);
  }
  return std::string(absl::StripAsciiWhitespace(line));
}

absl::StatusOr<std::vector<std::string>> SysfsTopology::List(const std::string& relative,
                                                             const std::string& prefix) const {
  std::vector<std::string> names;
  if (files_) {
    std::string dir = relative + "/";
    for (auto it = files_->lower_bound(dir); it != files_->end() && it->first.starts_with(dir);
         ++it) {
      std::string name = it->first.substr(dir.size());
      name.resize(name.find('/') == std::string::npos ? name.size() : name.find('/'));
      if (name.starts_with(prefix) && (names.empty() || names.back() != name)) {
        names.push_back(name);
      }
    }
    if (names.empty()) return ErrnoStatus(absl::StrCat("opendir ", root_, "/", relative), ENOENT);
    return names;
  }
  std::string path = absl::StrCat(root_, "/", relative);
  DIR* dir = opendir(path.c_str());
  if (dir == nullptr) return ErrnoStatus(absl::StrCat("opendir ", path), errno);
  while (dirent* e = readdir(dir)) {
    std::string name = e->d_name;
    if (name.starts_with(prefix)) names.push_back(name);
  }
  closedir(dir);
  return names;
}

absl::StatusOr<int> SysfsTopology::ReadInt(const std::string& relative) const {
  ASSIGN_OR_RETURN(std::string text, ReadLine(relative));
  int value = 0;
  if (!absl::SimpleAtoi(text, &value)) {
    return absl::DataLossError(
        absl::StrCat(root_, "/", relative, ": '", text, "' is not a number"));
  }
  return value;
}

absl::StatusOr<std::vector<int>> SysfsTopology::ReadCpuList(const std::string& relative) const {
  ASSIGN_OR_RETURN(std::string text, ReadLine(relative));
  if (text.empty()) return std::vector<int>{};  // a node without CPUs (memory only)
  absl::StatusOr<std::vector<int>> cpus = ParseCpuList(text);
  if (!cpus.ok()) {
    return absl::DataLossError(absl::StrCat(root_, "/", relative, ": ", cpus.status().message()));
  }
  return cpus;
}

absl::StatusOr<int> SysfsTopology::NumaNodeOfPciDevice(const std::string& address) const {
  ASSIGN_OR_RETURN(int node, ReadInt(absl::StrCat("bus/pci/devices/", address, "/numa_node")));
  return node < 0 ? 0 : node;
}

absl::StatusOr<std::vector<int>> SysfsTopology::PossibleNodes() const {
  return ReadCpuList("devices/system/node/possible");
}

absl::StatusOr<std::vector<int>> SysfsTopology::CpusOfNode(int node) const {
  return ReadCpuList(absl::StrCat("devices/system/node/node", node, "/cpulist"));
}

absl::StatusOr<int> SysfsTopology::SocketOfCpu(int cpu) const {
  return ReadInt(absl::StrCat("devices/system/cpu/cpu", cpu, "/topology/physical_package_id"));
}

absl::StatusOr<std::vector<int>> SysfsTopology::CoreSiblingsOf(int cpu) const {
  return ReadCpuList(absl::StrCat("devices/system/cpu/cpu", cpu, "/topology/thread_siblings_list"));
}

absl::StatusOr<std::vector<int>> SysfsTopology::LastLevelCacheSharersOf(int cpu) const {
  std::string cache = absl::StrCat("devices/system/cpu/cpu", cpu, "/cache");
  ASSIGN_OR_RETURN(std::vector<std::string> entries, List(cache, "index"));
  std::vector<std::string> indexes;
  for (const std::string& entry : entries) {
    int n = 0;
    if (absl::SimpleAtoi(absl::string_view(entry).substr(5), &n)) indexes.push_back(entry);
  }
  int best_level = -1;
  std::vector<int> sharers;
  for (const std::string& index : indexes) {
    std::string at = absl::StrCat(cache, "/", index);
    ASSIGN_OR_RETURN(std::string type, ReadLine(at + "/type"));
    if (type != "Unified" && type != "Data") continue;  // not the instruction cache
    ASSIGN_OR_RETURN(int level, ReadInt(at + "/level"));
    if (level <= best_level) continue;
    ASSIGN_OR_RETURN(sharers, ReadCpuList(at + "/shared_cpu_list"));
    best_level = level;
  }
  if (best_level < 0) {
    return absl::NotFoundError(
        absl::StrCat(root_, "/", cache, ": no data or unified cache listed"));
  }
  return sharers;
}

}  // namespace muster

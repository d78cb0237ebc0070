#include "launch/sysfs_topology.h"

#include <dirent.h>

#include <cerrno>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/errno_status.h"
#include "base/status_macros.h"
#include "launch/cpu_topology.h"

namespace muster {

absl::StatusOr<std::string> SysfsTopology::ReadLine(const std::string& relative) const {
  std::string path = absl::StrCat(root_, "/", relative);
  std::ifstream in(path);
  if (!in) return ErrnoStatus(absl::StrCat("open ", path), errno);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
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
  std::string dir_path = absl::StrCat(root_, "/", cache);
  DIR* dir = opendir(dir_path.c_str());
  if (dir == nullptr) return ErrnoStatus(absl::StrCat("opendir ", dir_path), errno);
  std::vector<std::string> indexes;
  while (dirent* e = readdir(dir)) {
    absl::string_view name = e->d_name;
    int n = 0;
    if (absl::ConsumePrefix(&name, "index") && absl::SimpleAtoi(name, &n)) {
      indexes.push_back(e->d_name);
    }
  }
  closedir(dir);
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
    return absl::NotFoundError(absl::StrCat(dir_path, ": no data or unified cache listed"));
  }
  return sharers;
}

}  // namespace muster

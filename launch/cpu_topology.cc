#include "launch/cpu_topology.h"

#include <dirent.h>
#include <sched.h>

#include <fstream>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace muster {

absl::StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> cpus;
  std::set<int> seen;
  absl::string_view t = absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (t.empty()) return absl::InvalidArgumentError("empty CPU list; write e.g. 0-3,8,10-11");
  // Every part is N or N-M and nothing else: "1-2-3" is an error, not 1-2 (the whole value
  // must be consumed), and so is an empty part ("0,,3") or a CPU listed twice.
  for (absl::string_view part : absl::StrSplit(t, ',')) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int lo = 0, hi = 0;
    bool ok = range.size() <= 2 && absl::SimpleAtoi(range.front(), &lo) &&
              absl::SimpleAtoi(range.back(), &hi);
    if (!ok || lo < 0 || hi < lo || hi >= CPU_SETSIZE) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", part, "' is not a CPU or range; write e.g. 0-3,8,10-11"));
    }
    for (int c = lo; c <= hi; ++c) {
      if (!seen.insert(c).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("CPU ", c, " is listed twice ('", part, "'); list each CPU once"));
      }
      cpus.push_back(c);
    }
  }
  return cpus;
}

std::vector<int> AffinityCpus() {
  cpu_set_t set;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::map<int, int> NumaNodeOfCpu() {
  std::map<int, int> out;
  DIR* dir = opendir("/sys/devices/system/node");
  if (dir == nullptr) return out;
  while (dirent* e = readdir(dir)) {
    std::string_view name = e->d_name;
    int node = 0;
    if (name.substr(0, 4) != "node" ||
        !absl::SimpleAtoi(absl::string_view(name.substr(4).data(), name.size() - 4), &node)) {
      continue;
    }
    std::ifstream in(absl::StrCat("/sys/devices/system/node/", e->d_name, "/cpulist"));
    std::string line;
    if (!std::getline(in, line)) continue;
    absl::StatusOr<std::vector<int>> cpus = ParseCpuList(line);
    if (!cpus.ok()) continue;
    for (int c : *cpus) out[c] = node;
  }
  closedir(dir);
  return out;
}

}  // namespace muster

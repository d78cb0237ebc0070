#include "agent/config/volcano_hosts.h"

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace muster {
namespace {

using Tasks = std::vector<std::pair<std::string, std::vector<std::string>>>;

std::vector<std::string> SplitHosts(std::string_view text, char separator) {
  std::vector<std::string> hosts;
  for (absl::string_view h : absl::StrSplit(absl::string_view(text.data(), text.size()), separator,
                                            absl::SkipWhitespace())) {
    hosts.emplace_back(absl::StripAsciiWhitespace(h));
  }
  return hosts;
}

// Task name (upper case) -> hosts, from VC_<TASK>_HOSTS.
Tasks FromEnvironment(const std::map<std::string, std::string>& env) {
  Tasks tasks;
  for (const auto& [name, value] : env) {
    if (!absl::StartsWith(name, "VC_") || !absl::EndsWith(name, "_HOSTS")) continue;
    std::string task = name.substr(3, name.size() - 3 - 6);
    if (task.empty()) continue;
    tasks.emplace_back(task, SplitHosts(value, ','));
  }
  return tasks;
}

// Task name (upper case) -> hosts, from <dir>/<task>.host.
Tasks FromFiles(const std::string& dir) {
  Tasks tasks;
  std::unique_ptr<DIR, int (*)(DIR*)> d(opendir(dir.c_str()), closedir);
  if (d == nullptr) return tasks;  // not a Volcano Pod with the svc plugin
  while (dirent* e = readdir(d.get())) {
    std::string file = e->d_name;
    if (!absl::EndsWith(file, ".host") || file.size() == 5) continue;
    std::ifstream in(absl::StrCat(dir, "/", file));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    tasks.emplace_back(absl::AsciiStrToUpper(file.substr(0, file.size() - 5)),
                       SplitHosts(text, '\n'));
  }
  return tasks;
}

}  // namespace

std::vector<std::string> VolcanoHosts(const std::map<std::string, std::string>& env,
                                      const std::string& dir) {
  Tasks tasks = FromEnvironment(env);
  if (tasks.empty()) tasks = FromFiles(dir);
  // "master" first (the pytorch convention of a master task and a worker task), then by name.
  std::sort(tasks.begin(), tasks.end(), [](const auto& a, const auto& b) {
    return std::make_pair(a.first != "MASTER", a.first) <
           std::make_pair(b.first != "MASTER", b.first);
  });
  std::vector<std::string> hosts;
  for (auto& [task, list] : tasks) hosts.insert(hosts.end(), list.begin(), list.end());
  return hosts;
}

int VolcanoNodeRank(const std::vector<std::string>& hosts, const std::string& hostname) {
  if (hostname.empty()) return -1;
  for (size_t i = 0; i < hosts.size(); ++i) {
    std::string_view first = hosts[i];
    first = first.substr(0, first.find('.'));
    if (first == hostname) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace muster

#include "agent/config/host_info.h"

#include <dirent.h>
#include <sched.h>
#include <unistd.h>

#include <string_view>

#include "absl/strings/str_split.h"

namespace muster {

int CountAffinityCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return CPU_COUNT(&set);
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int CountNvidiaDevices() {
  int count = 0;
  DIR* dir = opendir("/dev");
  if (dir == nullptr) return 0;
  while (dirent* e = readdir(dir)) {
    std::string_view n = e->d_name;
    if (n.size() > 6 && n.substr(0, 6) == "nvidia" &&
        n.find_first_not_of("0123456789", 6) == std::string_view::npos) {
      ++count;
    }
  }
  closedir(dir);
  return count;
}

bool DriverMayBePresent(const std::map<std::string, std::string>& env) {
  return access("/dev/nvidiactl", F_OK) == 0 || env.count("MUSTER_LIBCUDA") > 0;
}

HostInfo HostInfo::Detect(const std::map<std::string, std::string>& env) {
  HostInfo h;
  h.cpus = CountAffinityCpus();
  auto it = env.find("CUDA_VISIBLE_DEVICES");
  if (it != env.end()) {
    for (absl::string_view d : absl::StrSplit(it->second, ',', absl::SkipWhitespace())) {
      if (d == "-1" || d == "NoDevFiles") break;  // CUDA stops at the first invalid entry
      ++h.gpus;
    }
  } else {
    h.gpus = CountNvidiaDevices();
  }
  h.driver_may_be_present = DriverMayBePresent(env);
  h.termination_log_writable = access("/dev/termination-log", W_OK) == 0;
  char name[256] = {};
  // No hostname: nothing for the operator conventions to compare an endpoint with.
  if (gethostname(name, sizeof(name) - 1) == 0) h.hostname = name;
  return h;
}

}  // namespace muster

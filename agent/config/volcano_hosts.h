// Volcano's svc plugin (volcano-sh/volcano pkg/controllers/job/plugins/svc): every Pod of a
// Volcano Job gets, per task of the job, the task's hosts "<hostname>.<subdomain>" both as
// environment (VC_<TASK>_HOSTS comma-separated, VC_<TASK>_NUM; <TASK> upper-cased, '-' as
// '_') and as files (/etc/volcano/<task>.host, one host per line). Without Volcano's pytorch
// plugin (which sets MASTER_ADDR, WORLD_SIZE and RANK) that is all a Pod knows of the job;
// it is enough: the nodes are the tasks' hosts, a task named "master" first and the others
// by name, the node rank is this Pod's place in that list, and the first host serves the
// rendezvous. Thread-compatible (no state).
#ifndef MUSTER_AGENT_VOLCANO_HOSTS_H_
#define MUSTER_AGENT_VOLCANO_HOSTS_H_

#include <map>
#include <string>
#include <vector>

namespace muster {

inline constexpr char kVolcanoHostDir[] = "/etc/volcano";

// Every task's hosts in node order: from the VC_<TASK>_HOSTS variables, or when there are
// none from <dir>/<task>.host. Empty when neither is there.
std::vector<std::string> VolcanoHosts(const std::map<std::string, std::string>& env,
                                      const std::string& dir = kVolcanoHostDir);

// The index in `hosts` of the one whose first label is `hostname`; -1 when none is.
int VolcanoNodeRank(const std::vector<std::string>& hosts, const std::string& hostname);

}  // namespace muster

#endif  // MUSTER_AGENT_VOLCANO_HOSTS_H_

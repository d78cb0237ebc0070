// `muster run --dry-run`: the resolved configuration, printed for people.
#ifndef MUSTER_AGENT_DRY_RUN_H_
#define MUSTER_AGENT_DRY_RUN_H_

#include <map>
#include <string>

#include "agent/config/config.h"

namespace muster {

std::string DescribeConfig(const Config& config, const std::map<std::string, std::string>& env);

}  // namespace muster

#endif  // MUSTER_AGENT_DRY_RUN_H_

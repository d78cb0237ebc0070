// WorkerSpec: everything launch/ needs to start one worker, decided before anything is
// spawned (agent/workers/worker_specs.h builds it from the config and the round, as a pure
// function; debug mode writes the same specs to files instead of running them). Plain data.
#ifndef MUSTER_LAUNCH_WORKER_SPEC_H_
#define MUSTER_LAUNCH_WORKER_SPEC_H_

#include <string>

#include "launch/spawner.h"
#include "launch/worker_output.h"

namespace muster {

// Where one worker sits in the job, for one round.
struct WorkerPlacement {
  int local_rank = 0;
  int rank = 0;
  int group_rank = 0;  // node rank
  int group_world_size = 1;
  int local_world_size = 1;
  int world_size = 1;
  int role_rank = 0;
  int role_world_size = 1;
};

struct WorkerSpec {
  WorkerPlacement placement;
  // argv, the complete environment and the CPU share; the launcher adds the output fds.
  SpawnSpec spawn;
  // The worker's own directory (attempt_N/<local_rank>), made before it starts; its
  // TORCHELASTIC_ERROR_FILE lies there.
  std::string dir;
  std::string error_file;
  std::string output_prefix;  // "[default0]:"
  StreamOptions out, err;     // console and per-rank files of stdout and stderr
};

}  // namespace muster

#endif  // MUSTER_LAUNCH_WORKER_SPEC_H_

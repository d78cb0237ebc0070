/* Shared helpers for the fake driver libraries (tests only). Behaviour is
 * steered by environment variables so one build covers every test case:
 *   FAKE_HANG=<symbol>   that call blocks forever (the probe's timeout test)
 *   FAKE_CRASH=<symbol>  that call dies with SIGSEGV (crash isolation test)
 *   FAKE_GPU_COUNT=N     GPUs seen by CUDA, NVML and NCCL (default 1)
 * Each fake_*.c lists its own variables. */
#ifndef MUSTER_TESTS_FAKES_FAKE_COMMON_H_
#define MUSTER_TESTS_FAKES_FAKE_COMMON_H_

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline long fake_env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  return (v && *v) ? strtol(v, NULL, 0) : fallback;
}

static inline int fake_gpu_count(void) { return (int)fake_env_long("FAKE_GPU_COUNT", 1); }

/* Called first by every fake entry point. */
static inline void fake_enter(const char* symbol) {
  const char* hang = getenv("FAKE_HANG");
  if (hang && strcmp(hang, symbol) == 0) {
    for (;;) pause(); /* a hung driver: only SIGKILL ends this */
  }
  const char* crash = getenv("FAKE_CRASH");
  if (crash && strcmp(crash, symbol) == 0) {
    raise(SIGSEGV);
  }
}

#endif /* MUSTER_TESTS_FAKES_FAKE_COMMON_H_ */

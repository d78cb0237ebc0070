/* spawn_baseline MODE K BALLAST_MB CMD [ARGS...]
 *
 * Starts K copies of CMD back to back the way an agent would (MODE = posix_spawn, vfork or
 * fork: fork()+execv), with LOCAL_RANK=i in each child's environment, then reaps them all.
 * BALLAST_MB > 0 first allocates and touches that much memory so the parent is large.
 * Prints "t_begin t_spawned t_reaped" (CLOCK_MONOTONIC ns): before the first spawn, after the
 * last spawn call returned, after the last child was reaped. */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char** argv) {
  if (argc < 5) return 2;
  const char* mode = argv[1];
  int k = atoi(argv[2]);
  long ballast_mb = atol(argv[3]);
  char** cmd = argv + 4;
  if (ballast_mb > 0) {
    size_t n = (size_t)ballast_mb << 20;
    char* b = malloc(n);
    for (size_t i = 0; i < n; i += 4096) b[i] = 1;
  }
  /* environ for the children: ours plus LOCAL_RANK / TORCHELASTIC_RESTART_COUNT */
  int ne = 0;
  while (environ[ne]) ++ne;
  char** env = calloc((size_t)ne + 3, sizeof(char*));
  for (int i = 0; i < ne; ++i) env[i] = environ[i];
  char rank_var[32];
  env[ne] = rank_var;
  env[ne + 1] = "TORCHELASTIC_RESTART_COUNT=0";
  pid_t* pids = calloc((size_t)k, sizeof(pid_t));
  long long t_begin = now_ns();
  for (int i = 0; i < k; ++i) {
    snprintf(rank_var, sizeof rank_var, "LOCAL_RANK=%d", i);
    if (!strcmp(mode, "posix_spawn")) {
      if (posix_spawn(&pids[i], cmd[0], NULL, NULL, cmd, env) != 0) return 3;
    } else {
      pid_t p = !strcmp(mode, "vfork") ? vfork() : fork();
      if (p == 0) {
        execve(cmd[0], cmd, env);
        _exit(127);
      }
      pids[i] = p;
    }
  }
  long long t_spawned = now_ns();
  for (int i = 0; i < k; ++i) {
    int st;
    waitpid(pids[i], &st, 0);
  }
  long long t_reaped = now_ns();
  printf("%lld %lld %lld\n", t_begin, t_spawned, t_reaped);
  return 0;
}

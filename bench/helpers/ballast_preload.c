/* LD_PRELOAD ballast for the agent (B7): when the host program is `muster` and
 * BENCH_BALLAST_MB is set, allocate and touch that much memory before main(), then drop
 * LD_PRELOAD/BENCH_BALLAST_MB from the environment so the workers the agent spawns do not
 * inherit the ballast. Agent code is untouched. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char* g_ballast;

__attribute__((constructor)) static void ballast_init(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return;
  exe[n] = '\0';
  const char* base = strrchr(exe, '/');
  base = base ? base + 1 : exe;
  const char* mb = getenv("BENCH_BALLAST_MB");
  if (strcmp(base, "muster") != 0 || !mb) return;
  size_t bytes = (size_t)atol(mb) << 20;
  g_ballast = malloc(bytes);
  if (g_ballast)
    for (size_t i = 0; i < bytes; i += 4096) g_ballast[i] = 1;
  unsetenv("LD_PRELOAD");
  unsetenv("BENCH_BALLAST_MB");
}

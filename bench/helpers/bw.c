/* bw: benchmark worker for B5 (failure -> respawn).
 *
 *   bw FILE FAILRANK DELAY_MS LAST_ATTEMPT PROBE [JITTER_MS]
 *
 * Appends "<kind> <local_rank> <attempt> <pid> <CLOCK_MONOTONIC ns>" lines to FILE:
 *   start  when the worker starts (every rank, every attempt)
 *   fail   rank FAILRANK, DELAY_MS (+ uniform random 0..JITTER_MS, so that the failure is not
 *          phase-locked to a polling agent's monitor loop) after its start, before _exit(143)
 *   term   a surviving rank, from its SIGTERM handler (the agent's stop signal arrived)
 *   probe  (PROBE=1) a child forked by the failing rank, left in its process group, from its
 *          SIGTERM handler: the agent's group-kill reached the failed worker's group
 * In attempt LAST_ATTEMPT every rank exits 0 right after its start stamp.
 * Optional environment (b5_multinode.py): BW_RANK_VAR names the rank variable (default
 * LOCAL_RANK; RANK selects one worker of the whole job), BW_FAIL_CODE the exit code (143).
 * All stamping is async-signal-safe (open/write/clock_gettime, hand-rolled formatting). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char* g_file;
static int g_rank, g_attempt;

static char* put_ll(char* p, long long v) {
  char tmp[24];
  int n = 0;
  if (v < 0) { *p++ = '-'; v = -v; }
  do { tmp[n++] = (char)('0' + v % 10); v /= 10; } while (v);
  while (n) *p++ = tmp[--n];
  return p;
}

static void stamp(const char* kind) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
  char line[128], *p = line;
  size_t k = strlen(kind);
  memcpy(p, kind, k); p += k; *p++ = ' ';
  p = put_ll(p, g_rank); *p++ = ' ';
  p = put_ll(p, g_attempt); *p++ = ' ';
  p = put_ll(p, getpid()); *p++ = ' ';
  p = put_ll(p, ns); *p++ = '\n';
  int fd = open(g_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd >= 0) { (void)!write(fd, line, (size_t)(p - line)); close(fd); }
}

static void on_term(int sig) { (void)sig; stamp("term"); _exit(143); }
static void on_term_probe(int sig) { (void)sig; stamp("probe"); _exit(143); }

int main(int argc, char** argv) {
  if (argc < 6) return 2;
  g_file = argv[1];
  int fail_rank = atoi(argv[2]);
  long delay_ms = atol(argv[3]);
  int last = atoi(argv[4]);
  int probe = atoi(argv[5]);
  long jitter_ms = argc > 6 ? atol(argv[6]) : 0;
  const char* rv = getenv("BW_RANK_VAR");
  const char* fc = getenv("BW_FAIL_CODE");
  int fail_code = fc ? atoi(fc) : 143;
  const char* r = getenv(rv ? rv : "LOCAL_RANK");
  const char* a = getenv("TORCHELASTIC_RESTART_COUNT");
  g_rank = r ? atoi(r) : -1;
  g_attempt = a ? atoi(a) : -1;
  stamp("start");
  if (g_attempt >= last) return 0;
  if (g_rank == fail_rank) {
    long long dns = delay_ms * 1000000LL;
    if (jitter_ms > 0) {
      struct timespec seed;
      clock_gettime(CLOCK_MONOTONIC, &seed);
      srand((unsigned)(seed.tv_nsec ^ getpid()));
      dns += (long long)((double)rand() / RAND_MAX * jitter_ms * 1e6);
    }
    struct timespec d = {(time_t)(dns / 1000000000LL), (long)(dns % 1000000000LL)};
    while (nanosleep(&d, &d) != 0) {}
    if (probe) {
      int p[2];
      if (pipe(p) != 0) return 3;
      pid_t c = fork();
      if (c == 0) {
        signal(SIGTERM, on_term_probe);
        alarm(30); /* never outlive the benchmark, whatever the agent does */
        close(p[0]);
        (void)!write(p[1], "x", 1);
        close(p[1]);
        for (;;) pause();
      }
      char x;
      close(p[1]);
      (void)!read(p[0], &x, 1);
    }
    stamp("fail");
    _exit(fail_code);
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_term;
  sigaction(SIGTERM, &sa, NULL);
  alarm(120);
  for (;;) pause();
}

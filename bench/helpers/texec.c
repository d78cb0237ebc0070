/* texec FD CMD [ARGS...]: write CLOCK_MONOTONIC ns (t0) to fd FD, then execvp CMD.
 * t0 is taken immediately before execve(2) so that "exec -> workers running" starts there. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  int fd = atoi(argv[1]);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  dprintf(fd, "%lld\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec);
  close(fd);
  execvp(argv[2], argv + 2);
  perror("execvp");
  return 127;
}

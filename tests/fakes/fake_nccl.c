/* Fake libnccl.so.2 for tests. ncclAllReduce "takes" the time the configured
 * bus bandwidth implies, so the probe's busbw comes out near it:
 *   t = bytes / algbw,  algbw = busbw / (2 (n-1) / n)   (nccl-tests' all_reduce)
 *   FAKE_NCCL_VERSION=22809      ncclGetVersion's code (2.28.9)
 *   FAKE_BUSBW="400[,BYTES:GBPS...]"  GB/s; per-size overrides make one size slow
 *   FAKE_NCCL_INIT_FAIL=<ncclResult_t>  ncclCommInitAll returns it */
#include <stdio.h>
#include <time.h>

#include "fake_common.h"

typedef int ncclResult_t;
typedef void* ncclComm_t;

static int g_ranks;

static double fake_busbw(unsigned long long bytes) {
  const char* spec = getenv("FAKE_BUSBW");
  if (!spec) return 400.0;
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", spec);
  double gbps = 400.0;
  char* save = NULL;
  for (char* item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    unsigned long long size = 0; double v = 0;
    if (sscanf(item, "%llu:%lf", &size, &v) == 2) {
      if (size == bytes) return v;
    } else if (sscanf(item, "%lf", &v) == 1) {
      gbps = v;
    }
  }
  return gbps;
}

ncclResult_t ncclGetVersion(int* version) {
  fake_enter("ncclGetVersion");
  *version = (int)fake_env_long("FAKE_NCCL_VERSION", 22809);
  return 0;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case 0: return "no error";
    case 1: return "unhandled cuda error";
    case 2: return "unhandled system error";
    case 5: return "invalid usage";
    default: return "unknown result code";
  }
}

ncclResult_t ncclCommInitAll(ncclComm_t* comms, int ndev, const int* devlist) {
  fake_enter("ncclCommInitAll");
  long fail = fake_env_long("FAKE_NCCL_INIT_FAIL", 0);
  if (fail) return (ncclResult_t)fail;
  if (ndev < 1 || ndev > fake_gpu_count()) return 4; /* ncclInvalidArgument */
  g_ranks = ndev;
  for (int i = 0; i < ndev; ++i) comms[i] = (ncclComm_t)(unsigned long)(0x3000 + devlist[i]);
  return 0;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) { return 0; }
ncclResult_t ncclGroupStart(void) { return 0; }
ncclResult_t ncclGroupEnd(void) { return 0; }

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, int datatype,
                           int op, ncclComm_t comm, void* stream) {
  fake_enter("ncclAllReduce");
  if ((unsigned long)comm != 0x3000) return 0; /* rank 0 accounts the group's time */
  unsigned long long bytes = (unsigned long long)count * 4;
  double n = g_ranks > 0 ? g_ranks : 1;
  double factor = n > 1 ? 2.0 * (n - 1) / n : 1.0;
  double algbw = fake_busbw(bytes) / factor * 1e9; /* B/s */
  double seconds = algbw > 0 ? (double)bytes / algbw : 0;
  if (seconds > 1e-6) {
    /* Spin: nanosleep overshoots by tens of microseconds, spinning keeps
     * busbw within a percent at the sizes thresholds are checked at. */
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    do {
      clock_gettime(CLOCK_MONOTONIC, &now);
    } while ((now.tv_sec - start.tv_sec) + (now.tv_nsec - start.tv_nsec) / 1e9 < seconds);
  }
  return 0;
}

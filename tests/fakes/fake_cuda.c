/* Fake libcuda.so.1 for tests: implements exactly the driver-API symbols
 * muster-probe binds (nccl_probe/driver_abi.h). Device pointers and streams
 * are made-up handles; nothing touches memory.
 *   FAKE_CUINIT_FAIL=<CUresult>  cuInit returns it (1 means 999, CUDA_ERROR_UNKNOWN)
 *   FAKE_CUDA_VERSION=13000      cuDriverGetVersion */
#include <stdio.h>

#include "fake_common.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void* CUcontext;
typedef void* CUstream;

static int g_initialized;

CUresult cuInit(unsigned int flags) {
  fake_enter("cuInit");
  long fail = fake_env_long("FAKE_CUINIT_FAIL", 0);
  if (fail != 0) return fail == 1 ? 999 : (CUresult)fail;
  if (fake_gpu_count() == 0) return 100; /* CUDA_ERROR_NO_DEVICE, as the real driver */
  g_initialized = 1;
  return 0;
}

CUresult cuDriverGetVersion(int* version) {
  fake_enter("cuDriverGetVersion");
  *version = (int)fake_env_long("FAKE_CUDA_VERSION", 13000);
  return 0;
}

CUresult cuDeviceGetCount(int* count) {
  fake_enter("cuDeviceGetCount");
  if (!g_initialized) return 3; /* CUDA_ERROR_NOT_INITIALIZED */
  *count = fake_gpu_count();
  return 0;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  fake_enter("cuDeviceGet");
  if (ordinal < 0 || ordinal >= fake_gpu_count()) return 101; /* INVALID_DEVICE */
  *device = ordinal;
  return 0;
}

CUresult cuDeviceGetPCIBusId(char* bus_id, int len, CUdevice dev) {
  fake_enter("cuDeviceGetPCIBusId");
  snprintf(bus_id, (size_t)len, "0000:%02X:00.0", 0x18 + dev);
  return 0;
}

CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case 0: *name = "CUDA_SUCCESS"; return 0;
    case 3: *name = "CUDA_ERROR_NOT_INITIALIZED"; return 0;
    case 100: *name = "CUDA_ERROR_NO_DEVICE"; return 0;
    case 803: *name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"; return 0;
    case 999: *name = "CUDA_ERROR_UNKNOWN"; return 0;
    default: *name = NULL; return 1; /* CUDA_ERROR_INVALID_VALUE */
  }
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  fake_enter("cuDevicePrimaryCtxRetain");
  *ctx = (CUcontext)(unsigned long)(0x1000 + dev);
  return 0;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return 0; }
CUresult cuCtxSetCurrent(CUcontext ctx) { return 0; }

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytes) {
  fake_enter("cuMemAlloc_v2");
  static CUdeviceptr next = 0x7f0000000000ULL;
  *dptr = next;
  next += (bytes + 0xfffff) & ~0xfffffULL;
  return 0;
}

CUresult cuMemFree_v2(CUdeviceptr dptr) { return 0; }

CUresult cuStreamCreate(CUstream* stream, unsigned int flags) {
  static unsigned long next = 0x2000;
  *stream = (CUstream)next++;
  return 0;
}

CUresult cuStreamSynchronize(CUstream stream) {
  fake_enter("cuStreamSynchronize");
  return 0;
}

CUresult cuStreamDestroy_v2(CUstream stream) { return 0; }

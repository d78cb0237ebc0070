/* Fake libnvidia-ml.so.1 for tests: the NVML symbols muster-probe binds.
 *   FAKE_GPU_NAME="NVIDIA H100 80GB HBM3"
 *   FAKE_ECC="gpu:corrected:uncorrected,..."   volatile ECC counters
 *   FAKE_ECC_UNSUPPORTED=1                     ECC queries return NOT_SUPPORTED
 *   FAKE_PROCS="gpu:pid:name:MiB,..."          compute processes per GPU
 *   FAKE_PROCS_FILE=PATH                       the same list read from PATH at each call,
 *                                              when it exists (a test changes it between
 *                                              two probes of one agent)
 *   FAKE_NVMLINIT_FAIL=<nvmlReturn_t>          nvmlInit_v2 returns it
 * Built twice: with -DFAKE_OMIT_PROCESSES the library lacks
 * nvmlDeviceGetComputeRunningProcesses_v3 (the "missing symbol" case). */
#include <stdio.h>

#include "fake_common.h"

typedef int nvmlReturn_t;
typedef struct { int index; } * nvmlDevice_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
} nvmlPciInfo_t;
typedef struct {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

static struct { int index; } g_devices[64];

static unsigned long long kGiB = 1ULL << 30;

/* Visits FAKE_PROCS entries "gpu:pid:name:mib"; returns the number matched. */
static unsigned fake_procs(int gpu, unsigned pid_filter, nvmlProcessInfo_t* out, unsigned cap,
                           char* name_out, unsigned name_len) {
  const char* spec = getenv("FAKE_PROCS");
  char buf[4096];
  const char* file = getenv("FAKE_PROCS_FILE");
  FILE* f = file ? fopen(file, "r") : NULL;
  if (f) {
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
  } else if (spec) {
    snprintf(buf, sizeof(buf), "%s", spec);
  } else {
    return 0;
  }
  unsigned n = 0;
  char* save = NULL;
  for (char* item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    int g = -1; unsigned pid = 0; char name[256] = ""; unsigned long long mib = 0;
    if (sscanf(item, "%d:%u:%255[^:]:%llu", &g, &pid, name, &mib) != 4) continue;
    if (pid_filter != 0) {
      if (pid == pid_filter) { snprintf(name_out, name_len, "%s", name); return 1; }
      continue;
    }
    if (g != gpu) continue;
    if (n < cap) {
      out[n].pid = pid;
      out[n].usedGpuMemory = mib << 20;
      out[n].gpuInstanceId = out[n].computeInstanceId = 0xFFFFFFFFu;
    }
    ++n;
  }
  return n;
}

static unsigned long long fake_used(int gpu) {
  nvmlProcessInfo_t infos[64];
  unsigned n = fake_procs(gpu, 0, infos, 64, NULL, 0);
  unsigned long long used = 0;
  for (unsigned i = 0; i < n && i < 64; ++i) used += infos[i].usedGpuMemory;
  return used + (512ULL << 20); /* driver reservation */
}

nvmlReturn_t nvmlInit_v2(void) {
  fake_enter("nvmlInit_v2");
  return (nvmlReturn_t)fake_env_long("FAKE_NVMLINIT_FAIL", 0);
}
nvmlReturn_t nvmlShutdown(void) { return 0; }

const char* nvmlErrorString(nvmlReturn_t r) {
  switch (r) {
    case 0: return "Success";
    case 3: return "Not Supported";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 15: return "GPU is lost";
    default: return "Unknown Error";
  }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char* version, unsigned int length) {
  snprintf(version, length, "%s", getenv("FAKE_DRIVER_VERSION") ? getenv("FAKE_DRIVER_VERSION") : "580.65.06");
  return 0;
}

nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char* name, unsigned int length) {
  if (fake_procs(-1, pid, NULL, 0, name, length) == 1 && kill((pid_t)pid, 0) == 0) return 0;
  return 6; /* NVML_ERROR_NOT_FOUND: as for a pid that is gone */
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  fake_enter("nvmlDeviceGetCount_v2");
  *count = (unsigned)fake_gpu_count();
  return 0;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (index >= (unsigned)fake_gpu_count() || index >= 64) return 2; /* INVALID_ARGUMENT */
  g_devices[index].index = (int)index;
  *device = (nvmlDevice_t)&g_devices[index];
  return 0;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char* name, unsigned int length) {
  const char* n = getenv("FAKE_GPU_NAME");
  snprintf(name, length, "%s", n ? n : "NVIDIA H100 80GB HBM3");
  return 0;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char* uuid, unsigned int length) {
  snprintf(uuid, length, "GPU-fa4e0000-0000-4000-8000-%012x", d->index);
  return 0;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* pci) {
  memset(pci, 0, sizeof(*pci));
  pci->bus = 0x18u + (unsigned)d->index;
  snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", pci->bus);
  snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
  return 0;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t* m) {
  m->total = 80 * kGiB;
  m->used = fake_used(d->index);
  m->free = m->total - m->used;
  return 0;
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int error_type, int counter_type,
                                         unsigned long long* count) {
  if (fake_env_long("FAKE_ECC_UNSUPPORTED", 0)) return 3;
  *count = 0;
  const char* spec = getenv("FAKE_ECC");
  if (!spec) return 0;
  char buf[1024];
  snprintf(buf, sizeof(buf), "%s", spec);
  char* save = NULL;
  for (char* item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
    int g = -1; unsigned long long corrected = 0, uncorrected = 0;
    if (sscanf(item, "%d:%llu:%llu", &g, &corrected, &uncorrected) == 3 && g == d->index) {
      *count = error_type == 0 ? corrected : uncorrected;
    }
  }
  return 0;
}

#ifndef FAKE_OMIT_PROCESSES
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int* count,
                                                     nvmlProcessInfo_t* infos) {
  fake_enter("nvmlDeviceGetComputeRunningProcesses_v3");
  unsigned n = fake_procs(d->index, 0, infos, *count, NULL, 0);
  if (n > *count) { *count = n; return 7; } /* INSUFFICIENT_SIZE */
  *count = n;
  return 0;
}
#endif

#include "nccl_probe/allreduce_bench.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "nccl_probe/bandwidth.h"

namespace muster::probe {
namespace {

// Per-GPU resources; released in reverse order by ~Devices even on error.
struct Device {
  abi::CUdevice dev = 0;
  abi::CUcontext ctx = nullptr;
  abi::CUdeviceptr send = 0;
  abi::CUdeviceptr recv = 0;
  abi::CUstream stream = nullptr;
  abi::ncclComm_t comm = nullptr;
};

class Devices {
 public:
  Devices(const CudaApi& cuda, const NcclApi& nccl) : cuda_(cuda), nccl_(nccl) {}
  ~Devices() {
    // Errors while tearing down are ignored on purpose: the child exits next.
    for (Device& d : devices_) {
      if (d.comm) nccl_.ncclCommDestroy(d.comm);
    }
    for (Device& d : devices_) {
      if (d.ctx) cuda_.cuCtxSetCurrent(d.ctx);
      if (d.stream) cuda_.cuStreamDestroy_v2(d.stream);
      if (d.send) cuda_.cuMemFree_v2(d.send);
      if (d.recv) cuda_.cuMemFree_v2(d.recv);
      if (d.ctx) cuda_.cuDevicePrimaryCtxRelease_v2(d.dev);
    }
  }

  absl::Status Open(int ranks, uint64_t max_bytes) {
    devices_.resize(ranks);
    for (int i = 0; i < ranks; ++i) {
      Device& d = devices_[i];
      RETURN_IF_ERROR(cuda_.Check(cuda_.cuDeviceGet(&d.dev, i), "cuDeviceGet"));
      RETURN_IF_ERROR(
          cuda_.Check(cuda_.cuDevicePrimaryCtxRetain(&d.ctx, d.dev), "cuDevicePrimaryCtxRetain"));
      RETURN_IF_ERROR(cuda_.Check(cuda_.cuCtxSetCurrent(d.ctx), "cuCtxSetCurrent"));
      RETURN_IF_ERROR(cuda_.Check(cuda_.cuMemAlloc_v2(&d.send, max_bytes), "cuMemAlloc"));
      RETURN_IF_ERROR(cuda_.Check(cuda_.cuMemAlloc_v2(&d.recv, max_bytes), "cuMemAlloc"));
      RETURN_IF_ERROR(cuda_.Check(cuda_.cuStreamCreate(&d.stream, abi::kCuStreamNonBlocking),
                                  "cuStreamCreate"));
    }
    std::vector<abi::ncclComm_t> comms(ranks, nullptr);
    std::vector<int> devlist(ranks);
    for (int i = 0; i < ranks; ++i) devlist[i] = i;
    RETURN_IF_ERROR(
        nccl_.Check(nccl_.ncclCommInitAll(comms.data(), ranks, devlist.data()), "ncclCommInitAll"));
    for (int i = 0; i < ranks; ++i) devices_[i].comm = comms[i];
    return absl::OkStatus();
  }

  // One all-reduce on every GPU, grouped as one collective.
  absl::Status AllReduce(uint64_t count) {
    RETURN_IF_ERROR(nccl_.Check(nccl_.ncclGroupStart(), "ncclGroupStart"));
    for (Device& d : devices_) {
      abi::ncclResult_t rc = nccl_.ncclAllReduce(
          reinterpret_cast<const void*>(d.send), reinterpret_cast<void*>(d.recv), count,
          abi::kNcclFloat32, abi::kNcclSum, d.comm, d.stream);
      if (rc != abi::kNcclSuccess) {
        nccl_.ncclGroupEnd();
        return nccl_.Check(rc, "ncclAllReduce");
      }
    }
    return nccl_.Check(nccl_.ncclGroupEnd(), "ncclGroupEnd");
  }

  absl::Status Synchronize() {
    for (Device& d : devices_) {
      RETURN_IF_ERROR(cuda_.Check(cuda_.cuStreamSynchronize(d.stream), "cuStreamSynchronize"));
    }
    return absl::OkStatus();
  }

 private:
  const CudaApi& cuda_;
  const NcclApi& nccl_;
  std::vector<Device> devices_;
};

}  // namespace

absl::StatusOr<std::vector<BenchRow>> RunAllReduceBench(const CudaApi& cuda, const NcclApi& nccl,
                                                        int ranks, const BenchOptions& options,
                                                        const StageFn& stage) {
  if (ranks < 1) return absl::FailedPreconditionError("no CUDA device to all-reduce over");
  if (options.sizes.empty()) return absl::InvalidArgumentError("no message sizes");
  const uint64_t max_bytes = *std::max_element(options.sizes.begin(), options.sizes.end());
  Devices devices(cuda, nccl);
  stage(absl::StrCat("ncclCommInitAll over ", ranks, " GPUs"));
  RETURN_IF_ERROR(devices.Open(ranks, max_bytes));
  std::vector<BenchRow> rows;
  for (uint64_t bytes : options.sizes) {
    const uint64_t count = bytes / sizeof(float);
    if (count == 0) continue;
    stage(absl::StrCat("all-reduce ", FormatByteSize(bytes)));
    for (int i = 0; i < options.warmup_iters; ++i) RETURN_IF_ERROR(devices.AllReduce(count));
    RETURN_IF_ERROR(devices.Synchronize());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < options.iters; ++i) RETURN_IF_ERROR(devices.AllReduce(count));
    RETURN_IF_ERROR(devices.Synchronize());
    const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
    const double seconds = elapsed.count() / options.iters;
    const uint64_t moved = count * sizeof(float);
    rows.push_back({moved, count, seconds * 1e6, AlgBwGBps(moved, seconds),
                    BusBwGBps(Collective::kAllReduce, moved, seconds, ranks)});
  }
  return rows;
}

}  // namespace muster::probe

#include "runtime/model/device_memory.hpp"

#include <sys/resource.h>
#include <torch/cuda.h>

// ASYNCRL_TORCH_CUDA is set by CMake, for this file only, when libtorch has c10_cuda (a CUDA
// build such as the PyPI wheel); Debian's CPU libtorch ships the header but not the library.
#if ASYNCRL_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace asyncrl {

namespace {

bool has_cuda_device(int index) {
  return torch::cuda::is_available() && index >= 0 &&
         index < static_cast<int>(torch::cuda::device_count());
}

}  // namespace

cuda_memory_stats cuda_memory(int index) {
  cuda_memory_stats out;
#if ASYNCRL_TORCH_CUDA
  if (!has_cuda_device(index)) return out;
  auto s = c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(index));
  out.peak_allocated = s.allocated_bytes[0].peak;  // [0]: the aggregate over pool types
  out.peak_reserved = s.reserved_bytes[0].peak;
#else
  (void)index;
  (void)has_cuda_device;
#endif
  return out;
}

void reset_cuda_peaks(int index) {
#if ASYNCRL_TORCH_CUDA
  if (has_cuda_device(index))
    c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

void cuda_synchronize() {
  if (torch::cuda::is_available()) torch::cuda::synchronize();
}

int64_t host_peak_rss_bytes() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

}  // namespace asyncrl

#pragma once

// Memory figures for benchmarks and run summaries: the CUDA caching allocator's peaks (only a
// CUDA build of libtorch has them) and the process's peak resident set. Torch-free header.

#include <cstdint>

namespace asyncrl {

struct cuda_memory_stats {
  int64_t peak_allocated = -1;  // bytes of tensors at the peak since the last reset
  int64_t peak_reserved = -1;   // bytes the caching allocator held at its peak
};

/// CUDA device `index`'s peaks; -1 everywhere when this libtorch was built without CUDA or
/// has no such device.
cuda_memory_stats cuda_memory(int index);
/// Starts a new peak measurement on CUDA device `index` (nothing without CUDA).
void reset_cuda_peaks(int index);
/// Waits for the work queued on every CUDA device (nothing without CUDA): timings of device
/// work must include it.
void cuda_synchronize();
/// The process's peak resident set in bytes (getrusage).
int64_t host_peak_rss_bytes();

}  // namespace asyncrl

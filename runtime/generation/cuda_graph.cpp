#include "runtime/generation/cuda_graph.hpp"

// ASYNCRL_TORCH_CUDA is set by CMake for this file when libtorch has c10_cuda.
#if ASYNCRL_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <exception>

namespace asyncrl {

struct cuda_graph::impl {
#if ASYNCRL_TORCH_CUDA
  at::cuda::CUDAGraph graph;
#endif
};

cuda_graph::cuda_graph() : impl_(std::make_unique<impl>()) {}
cuda_graph::~cuda_graph() = default;

cuda_graph::pool_id cuda_graph::new_pool() {
#if ASYNCRL_TORCH_CUDA
  const auto id = at::cuda::graph_pool_handle();
  return {static_cast<uint64_t>(id.first), static_cast<uint64_t>(id.second)};
#else
  return {};
#endif
}

bool cuda_graph::available() {
#if ASYNCRL_TORCH_CUDA
  return true;
#else
  return false;
#endif
}

std::unique_ptr<cuda_graph> cuda_graph::capture(const std::function<void()>& work, pool_id pool,
                                                std::string& why) {
#if ASYNCRL_TORCH_CUDA
  try {
    std::unique_ptr<cuda_graph> g(new cuda_graph());
    // Capture must not run on the default stream; the side stream first waits for what the
    // default stream queued (the inputs the work reads).
    c10::cuda::device_synchronize();
    auto side = c10::cuda::getStreamFromPool();
    {
      c10::cuda::CUDAStreamGuard guard(side);
      work();  // warm-up, eagerly
      side.synchronize();
      // Thread-local capture: another thread's CUDA work (a trainer sharing the GPU) does not
      // break this capture.
      g->impl_->graph.capture_begin({pool.first, pool.second}, cudaStreamCaptureModeThreadLocal);
      work();
      g->impl_->graph.capture_end();
    }
    c10::cuda::device_synchronize();
    return g;
  } catch (const std::exception& e) {
    why = e.what();
    return nullptr;
  }
#else
  (void)work, (void)pool;
  why = "this libtorch has no CUDA";
  return nullptr;
#endif
}

void cuda_graph::replay() {
#if ASYNCRL_TORCH_CUDA
  impl_->graph.replay();
#endif
}

}  // namespace asyncrl

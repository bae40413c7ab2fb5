#include "runtime/generation/cuda_graph.hpp"

// ASYNCRL_TORCH_CUDA is set by CMake for this file when libtorch has c10_cuda.
#if ASYNCRL_TORCH_CUDA
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#endif

#include "runtime/model/cuda_stream.hpp"

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
    // Capture must not run on the caller's stream (the rollouter's own, or the default one);
    // the side stream, one of its own (never a pool stream that a role or another capture
    // holds, whose kernels would be captured), starts after everything queued so far (the
    // inputs the work reads). The device-wide syncs stay: they run once per graph (a few dozen
    // in a generator's life, its first chunks), not per chunk, and a capture then starts and
    // ends with no work of any stream in flight, as PyTorch's own torch.cuda.graph does.
    c10::cuda::device_synchronize();
    auto side = own_stream::on_device(c10::cuda::current_device());
    {
      stream_scope on(side);
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

#include "runtime/model/cuda_stream.hpp"

// ASYNCRL_TORCH_CUDA is set by CMake for this file when libtorch has c10_cuda.
#if ASYNCRL_TORCH_CUDA
#include <ATen/cuda/CUDAEvent.h>
#include <c10/core/Device.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>

#include <exception>
#include <map>
#include <mutex>
#include <vector>
#endif

#include <stdexcept>

namespace asyncrl {

#if ASYNCRL_TORCH_CUDA

struct own_stream::claim {
  int device = -1;
  cudaStream_t stream = nullptr;
  claim(int d, cudaStream_t s) : device(d), stream(s) {}
  claim(const claim&) = delete;
  claim& operator=(const claim&) = delete;
  ~claim();
};

struct stream_scope::guard {
  c10::cuda::CUDAStreamGuard g;
};

struct stream_event::impl {
  int device = -1;
  at::cuda::CUDAEvent event;  // cudaEventDisableTiming
};

namespace {

// Streams no claim holds, by device. Never freed (nor their streams destroyed): a claim may be
// released during static destruction, by a role's state going with the actor system.
std::mutex& free_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::map<int, std::vector<cudaStream_t>>& free_streams() {
  static auto* m = new std::map<int, std::vector<cudaStream_t>>;
  return *m;
}

cudaStream_t take_stream(int device) {
  {
    std::lock_guard<std::mutex> lock(free_mutex());
    auto& v = free_streams()[device];
    if (!v.empty()) {
      auto s = v.back();
      v.pop_back();
      return s;
    }
  }
  c10::cuda::CUDAGuard on(static_cast<c10::DeviceIndex>(device));
  cudaStream_t s = nullptr;
  // Non-blocking: no implicit ordering with the legacy default stream, in either direction.
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

c10::cuda::CUDAStream to_c10(const own_stream::claim& c) {
  return c10::cuda::getStreamFromExternal(c.stream, static_cast<c10::DeviceIndex>(c.device));
}

void check_device(int index, const std::string& what) {
  const int n = static_cast<int>(c10::cuda::device_count());
  if (index >= n)
    throw std::runtime_error("own_stream: " + what + ": this process sees " + std::to_string(n) +
                             " CUDA device(s)");
}

}  // namespace

own_stream::claim::~claim() {
  std::lock_guard<std::mutex> lock(free_mutex());
  free_streams()[device].push_back(stream);
}

own_stream own_stream::on_device(int index) {
  own_stream s;
  if (index < 0) return s;
  check_device(index, "device " + std::to_string(index));
  s.claim_ = std::make_shared<const claim>(index, take_stream(index));
  return s;
}

own_stream own_stream::for_device(const std::string& device) {
  c10::Device d(c10::kCPU);
  try {
    d = c10::Device(device);
  } catch (const std::exception& e) {
    throw std::runtime_error("own_stream: device '" + device + "': " + e.what());
  }
  if (!d.is_cuda()) return {};
  if (c10::cuda::device_count() == 0)
    throw std::runtime_error("own_stream: device '" + device + "': no CUDA device");
  return on_device(d.has_index() ? d.index() : c10::cuda::current_device());
}

int own_stream::device() const {
  return claim_ ? claim_->device : -1;
}

void own_stream::synchronize() const {
  if (claim_) to_c10(*claim_).synchronize();
}

stream_scope::stream_scope(const own_stream& s) {
  if (s.claim_) guard_.reset(new guard{c10::cuda::CUDAStreamGuard(to_c10(*s.claim_))});
}

stream_event stream_event::record(int index) {
  stream_event e;
  if (index < 0) return e;
  e.impl_ = std::make_shared<impl>();
  e.impl_->device = index;
  e.impl_->event.record(c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index)));
  return e;
}

void stream_event::block_current() const {
  if (impl_)
    impl_->event.block(
        c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(impl_->device)));
}

void stream_event::synchronize() const {
  if (impl_) impl_->event.synchronize();
}

bool stream_event::done() const {
  return !impl_ || impl_->event.query();
}

#else  // no CUDA: nothing to order

struct own_stream::claim {};
struct stream_scope::guard {};
struct stream_event::impl {};

own_stream own_stream::on_device(int) {
  return {};
}

own_stream own_stream::for_device(const std::string&) {
  return {};
}

int own_stream::device() const {
  return -1;
}

void own_stream::synchronize() const {}

stream_scope::stream_scope(const own_stream&) {}

stream_event stream_event::record(int) {
  return {};
}

void stream_event::block_current() const {}
void stream_event::synchronize() const {}
bool stream_event::done() const {
  return true;
}

#endif

stream_scope::~stream_scope() = default;

}  // namespace asyncrl

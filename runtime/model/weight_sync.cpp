#include "runtime/model/weight_sync.hpp"

#include <ATen/Parallel.h>

// ASYNCRL_TORCH_CUDA is set by CMake for this file when libtorch has c10_cuda.
#if ASYNCRL_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <cstring>
#include <stdexcept>

#include "runtime/common/cpu_time.hpp"
#include "runtime/common/omp_team.hpp"

#include "runtime/model/cuda_stream.hpp"
#include "runtime/model/model.hpp"

namespace asyncrl {

// (numel,) in the snapshot's dtype, on the device of the model it was taken from.
struct device_weights {
  at::Tensor flat;
  // Recorded on the writer's stream (the trainer's) after the copy that wrote `flat`: a reader
  // on another stream waits for it. Empty on the CPU.
  stream_event ready;
};

namespace {

at::ScalarType scalar_type(weight_dtype d) {
  return d == weight_dtype::bf16 ? at::kBFloat16 : at::kFloat;
}

// Tensor `i`'s elements in the blob (no copy); `off` is its first element.
at::Tensor view_of(const weight_blob& b, int64_t off, at::IntArrayRef shape) {
  auto* base =
      const_cast<unsigned char*>(b.data.data()) + static_cast<size_t>(off) * element_size(b.dtype);
  return at::from_blob(base, shape, scalar_type(b.dtype));
}

// The tensor at element `off` with `shape`, wherever the blob keeps its elements.
at::Tensor tensor_of(const weight_blob& b, int64_t off, at::IntArrayRef shape) {
  if (!b.on_device()) return view_of(b, off, shape);
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return b.device->flat.narrow(0, off, n).view(shape);
}

int cuda_index(const at::Tensor& t) {
  return t.is_cuda() ? t.device().index() : -1;
}

// Gives `blob` the device elements `flat`, written by work queued on this thread's current
// stream: the event recorded here is what readers on other streams wait for.
void set_device(weight_blob& blob, at::Tensor flat) {
  blob.device_numel = flat.numel();
  auto ready = stream_event::record(cuda_index(flat));
  blob.device =
      std::make_shared<const device_weights>(device_weights{std::move(flat), std::move(ready)});
}

// Orders this thread's current stream (on the snapshot's device) after the copy that wrote
// the snapshot, and keeps its memory from reuse until what that stream queues next (the
// reads) is done: the caching allocator gave the block to the writer's stream, and the
// writer's thread may drop the last reference while this stream still reads it. Call it
// before queueing the reads (the allocator records its event on this stream when the block
// is freed, after them).
void before_reading(const device_weights& d) {
  d.ready.block_current();
#if ASYNCRL_TORCH_CUDA
  if (d.flat.is_cuda())
    c10::cuda::CUDACachingAllocator::recordStream(
        d.flat.storage().data_ptr(), c10::cuda::getCurrentCUDAStream(d.flat.device().index()));
#endif
}

}  // namespace

bool on_accelerator(const CausalLMImpl& model) {
  auto params = model.parameters();
  return !params.empty() && !params.front().device().is_cpu();
}

weight_snapshot snapshot_weights(const CausalLMImpl& model, int64_t version, weight_dtype dtype,
                                 snapshot_place place) {
  const auto st = scalar_type(dtype);
  auto params = model.ordered_parameters();
  int64_t total = 0;
  for (auto& [name, p] : params)
    total += p.numel();
  at::NoGradGuard ng;
  auto blob = std::make_shared<weight_blob>();
  blob->dtype = dtype;
  at::Tensor flat;  // a device snapshot's elements until the copies are queued
  if (place == snapshot_place::device) {
    // One allocation on the model's device, then one copy kernel per tensor (below), queued on
    // this thread's current stream (the trainer's own).
    auto device = params.empty() ? at::Device(at::kCPU) : params.front().second.device();
    flat = at::empty({total}, at::TensorOptions().dtype(st).device(device));
  } else {
    blob->resize(total);
  }
  int64_t off = 0;
  for (auto& [name, p] : params) {
    blob->names.push_back(name);
    blob->shapes.emplace_back(p.sizes().begin(), p.sizes().end());
    if (flat.defined()) {
      flat.narrow(0, off, p.numel()).view(p.sizes()).copy_(p.detach());  // converts the dtype
    } else if (p.device().is_cpu() && p.scalar_type() == st && p.is_contiguous()) {
      // One memcpy on this thread: the buffer's pages are new, and copy_'s OpenMP team would
      // fault them in from several threads at once (contending on the page tables) and wait
      // for its slowest thread, which on a busy machine is one another process preempted.
      std::memcpy(blob->data.data() + static_cast<size_t>(off) * element_size(dtype), p.data_ptr(),
                  static_cast<size_t>(p.numel()) * element_size(dtype));
    } else {
      view_of(*blob, off, p.sizes()).copy_(p.detach());  // converts device and dtype
    }
    off += p.numel();
  }
  if (flat.defined()) set_device(*blob, std::move(flat));  // after the copies: their event
  return {version, std::move(blob)};
}

weight_snapshot host_snapshot(const weight_snapshot& w) {
  if (!w.blob || !w.blob->on_device()) return w;
  auto blob = std::make_shared<weight_blob>();
  blob->names = w.blob->names;
  blob->shapes = w.blob->shapes;
  blob->dtype = w.blob->dtype;
  const auto n = w.blob->numel();
  blob->resize(n);
  at::NoGradGuard ng;
  if (n > 0) {
    const auto& d = *w.blob->device;
    // On a stream of this copy's own that first waits for the writer's copy: the host then
    // waits for the trainer's stream up to the snapshot and for this copy, not for the rest of
    // the device (the trainer's next step, a rollouter's decode).
    auto copier = own_stream::on_device(cuda_index(d.flat));
    stream_scope on(copier);
    d.ready.block_current();
    view_of(*blob, 0, {n}).copy_(d.flat);  // synchronizes the copier's stream
  }
  return {w.version, std::move(blob)};
}

weight_snapshot convert_snapshot(const weight_snapshot& w, weight_dtype dtype) {
  if (!w.blob || w.blob->dtype == dtype) return w;
  if (w.blob->on_device()) {
    // On this thread's current stream, after the source's copy; the cast's event is the new
    // snapshot's.
    const auto& d = *w.blob->device;
    auto blob = std::make_shared<weight_blob>();
    blob->names = w.blob->names;
    blob->shapes = w.blob->shapes;
    blob->dtype = dtype;
    at::NoGradGuard ng;
    before_reading(d);
    set_device(*blob, d.flat.to(scalar_type(dtype)));
    return {w.version, std::move(blob)};
  }
  auto blob = std::make_shared<weight_blob>();
  blob->names = w.blob->names;
  blob->shapes = w.blob->shapes;
  blob->dtype = dtype;
  const auto n = w.blob->numel();
  blob->resize(n);
  at::NoGradGuard ng;
  if (n > 0) view_of(*blob, 0, {n}).copy_(view_of(*w.blob, 0, {n}));
  return {w.version, std::move(blob)};
}

void load_snapshot(CausalLMImpl& model, const weight_snapshot& w, bool alias) {
  if (!w.blob) throw std::runtime_error("load_snapshot: empty snapshot");
  auto params = model.ordered_parameters();
  const auto& b = *w.blob;
  if (b.names.size() != params.size())
    throw std::runtime_error("load_snapshot: snapshot has " + std::to_string(b.names.size()) +
                             " tensors, the model " + std::to_string(params.size()));
  at::NoGradGuard ng;
  // A device snapshot is read on this thread's current stream (a rollouter's own): after the
  // trainer's copy, and its memory is kept until these reads are done.
  if (b.on_device()) before_reading(*b.device);
  int64_t off = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    auto& [name, p] = params[i];
    std::vector<int64_t> want(p.sizes().begin(), p.sizes().end());
    if (b.names[i] != name || b.shapes[i] != want)
      throw std::runtime_error("load_snapshot: tensor " + std::to_string(i) + " is '" + b.names[i] +
                               "' in the snapshot but '" + name + "' in the model");
    auto numel = p.numel();
    if (off + numel > b.numel()) throw std::runtime_error("load_snapshot: snapshot data too short");
    // The snapshot is immutable and shared: alias it rather than copy when we can. A packed
    // projection (pack_projections) is copied into: re-pointing it would unpack it.
    auto src = tensor_of(b, off, p.sizes());
    if (alias && p.device().is_cpu() && src.device().is_cpu() &&
        p.scalar_type() == src.scalar_type() && !model.is_packed(p)) {
      p.set_requires_grad(false);
      p.set_data(src);
    } else {
      p.copy_(src);
    }
    off += numel;
  }
}

void set_torch_threads(int n) {
  if (n <= 0) return;
  // torch's per-thread lazy init (on a thread's first parallel region) sets the thread's OpenMP
  // count from a process-wide value, the last one any thread set: a role whose first parallel
  // op came after another role's set_num_threads took that role's count. Run it first, so the
  // count below stays this thread's.
  at::internal::lazy_init_num_threads();
  at::set_num_threads(n);
  if (n == 1) {
    set_compute_team({});
    return;
  }
  // The OpenMP team this thread leads: its threads' CPU clocks, so that compute regions book
  // the whole team (runtime/common/omp_team.hpp).
  set_compute_team(omp_team_clocks(n));
}

}  // namespace asyncrl

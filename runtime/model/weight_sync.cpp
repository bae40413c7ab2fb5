#include "runtime/model/weight_sync.hpp"

#include <ATen/Parallel.h>

#include <cstring>
#include <stdexcept>

#include "runtime/common/cpu_time.hpp"
#include "runtime/common/omp_team.hpp"

#include "runtime/model/model.hpp"

namespace asyncrl {

// (numel,) in the snapshot's dtype, on the device of the model it was taken from.
struct device_weights {
  at::Tensor flat;
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

std::shared_ptr<weight_blob> device_blob(at::Tensor flat, weight_dtype dtype) {
  auto blob = std::make_shared<weight_blob>();
  blob->dtype = dtype;
  blob->device_numel = flat.numel();
  blob->device = std::make_shared<const device_weights>(device_weights{std::move(flat)});
  return blob;
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
  std::shared_ptr<weight_blob> blob;
  if (place == snapshot_place::device) {
    // One allocation on the model's device, then one copy kernel per tensor (below).
    auto device = params.empty() ? at::Device(at::kCPU) : params.front().second.device();
    blob = device_blob(at::empty({total}, at::TensorOptions().dtype(st).device(device)), dtype);
  } else {
    blob = std::make_shared<weight_blob>();
    blob->dtype = dtype;
    blob->resize(total);
  }
  int64_t off = 0;
  for (auto& [name, p] : params) {
    blob->names.push_back(name);
    blob->shapes.emplace_back(p.sizes().begin(), p.sizes().end());
    if (!blob->on_device() && p.device().is_cpu() && p.scalar_type() == st && p.is_contiguous()) {
      // One memcpy on this thread: the buffer's pages are new, and copy_'s OpenMP team would
      // fault them in from several threads at once (contending on the page tables) and wait
      // for its slowest thread, which on a busy machine is one another process preempted.
      std::memcpy(blob->data.data() + static_cast<size_t>(off) * element_size(dtype), p.data_ptr(),
                  static_cast<size_t>(p.numel()) * element_size(dtype));
    } else {
      tensor_of(*blob, off, p.sizes()).copy_(p.detach());  // converts device and dtype
    }
    off += p.numel();
  }
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
  if (n > 0) view_of(*blob, 0, {n}).copy_(w.blob->device->flat);  // waits for the device
  return {w.version, std::move(blob)};
}

weight_snapshot convert_snapshot(const weight_snapshot& w, weight_dtype dtype) {
  if (!w.blob || w.blob->dtype == dtype) return w;
  if (w.blob->on_device()) {
    auto blob = device_blob(w.blob->device->flat.to(scalar_type(dtype)), dtype);
    blob->names = w.blob->names;
    blob->shapes = w.blob->shapes;
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
  int64_t off = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    auto& [name, p] = params[i];
    std::vector<int64_t> want(p.sizes().begin(), p.sizes().end());
    if (b.names[i] != name || b.shapes[i] != want)
      throw std::runtime_error("load_snapshot: tensor " + std::to_string(i) + " is '" + b.names[i] +
                               "' in the snapshot but '" + name + "' in the model");
    auto numel = p.numel();
    if (off + numel > b.numel()) throw std::runtime_error("load_snapshot: snapshot data too short");
    // The snapshot is immutable and shared: alias it rather than copy when we can.
    auto src = tensor_of(b, off, p.sizes());
    if (alias && p.device().is_cpu() && src.device().is_cpu() &&
        p.scalar_type() == src.scalar_type()) {
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

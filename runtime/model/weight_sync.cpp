#include "runtime/model/weight_sync.hpp"

#include <ATen/Parallel.h>

#include <stdexcept>

#include "runtime/model/model.hpp"

namespace asyncrl {

weight_snapshot snapshot_weights(const CausalLMImpl& model, int64_t version) {
  auto blob = std::make_shared<weight_blob>();
  auto params = model.ordered_parameters();
  int64_t total = 0;
  for (auto& [name, p] : params)
    total += p.numel();
  blob->data.resize(static_cast<size_t>(total));
  int64_t off = 0;
  at::NoGradGuard ng;
  for (auto& [name, p] : params) {
    blob->names.push_back(name);
    blob->shapes.emplace_back(p.sizes().begin(), p.sizes().end());
    auto dst = at::from_blob(blob->data.data() + off, p.sizes(), at::kFloat);
    dst.copy_(p.detach());  // converts device and dtype as needed
    off += p.numel();
  }
  return {version, std::move(blob)};
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
    if (off + numel > static_cast<int64_t>(b.data.size()))
      throw std::runtime_error("load_snapshot: snapshot data too short");
    // The snapshot is immutable and shared: alias it rather than copy when we can.
    auto src = at::from_blob(const_cast<float*>(b.data.data()) + off, p.sizes(), at::kFloat);
    if (alias && p.device().is_cpu() && p.scalar_type() == at::kFloat) {
      p.set_requires_grad(false);
      p.set_data(src);
    } else {
      p.copy_(src);
    }
    off += numel;
  }
}

void set_torch_threads(int n) {
  if (n > 0) at::set_num_threads(n);
}

}  // namespace asyncrl

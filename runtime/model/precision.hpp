#pragma once

// Mixed precision in two helpers. The dtype of the activations decides the arithmetic: weights
// are cast to it where they are used, so float32 master weights run a bf16 forward and get
// float32 gradients through the cast. Statistics (softmax, log-softmax, norms) never run below
// float32. Both are no-ops on float32 and float64 tensors, which keeps those paths bitwise as
// they were. Pulls in ATen.

#include <ATen/ATen.h>

namespace asyncrl {

/// `w` in the dtype of the activations `x` (no copy when they agree).
inline at::Tensor as_compute(const at::Tensor& w, const at::Tensor& x) {
  return w.scalar_type() == x.scalar_type() ? w : w.to(x.scalar_type());
}

/// bf16/fp16 -> float32; float32 and float64 unchanged.
inline at::Tensor at_least_float(const at::Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kDouble ? t : t.to(at::kFloat);
}

}  // namespace asyncrl

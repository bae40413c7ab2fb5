#pragma once

// The fused kernels of one decode step (no gradients): each replaces a chain of ATen operators
// (a kernel launch apiece on a GPU) by one pass over its data. Every one has a CPU kernel and,
// in a CUDA build, a CUDA kernel (fused_decode_cuda.cu); both compute what the ATen composition
// in model.cpp computes, with the same roundings to the activations' dtype at the same places,
// and are tested against it (tests/test_fused_decode.cpp). Pulls in ATen: include it only from
// the .cpp files that run the decode step.

#include <ATen/core/Tensor.h>

#include <utility>

namespace asyncrl::fused {

/// Whether the kernels take tensors of this dtype on this device: float32, float64, bf16 and
/// fp16 on the CPU; float32 and bf16 on CUDA (in a build with the CUDA kernels).
bool supported(const at::Tensor& x);
/// The same, and decode_attention has a kernel for this head size on x's device (any size on
/// the CPU; 32, 64, 96 or 128 on CUDA).
bool supported(const at::Tensor& x, int64_t head_dim);

/// The residual add and the RMSNorm after it. residual, x: (B, C); x undefined = no add.
/// Returns (sum, norm): sum = residual + x in their dtype, norm = weight * (sum * rsqrt(mean
/// (sum^2) + eps)) with the statistics in float32 (float64 for float64), the normalised value
/// rounded to the dtype before the product with weight (C,), as RMSNormImpl::forward does.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& residual, const at::Tensor& x,
                                               const at::Tensor& weight, double eps);

/// Rotary embedding of this step's queries and keys, and the cache write. q: (B, H*D), k, v:
/// (B, KVH*D), each row-contiguous with any row stride (column slices of one fused QKV output);
/// cos, sin: (B, D), the tables of each row's position; pos: (B,) int64. Writes rotated k and v
/// at pos[b] of cache row b (k_cache, v_cache: (slots, KVH, max_len, D), contiguous) and
/// returns the rotated queries (B, H, D). Products and sums round as x*cos + rotate_half(x)*sin.
at::Tensor rope_write_cache(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& pos,
                            at::Tensor& k_cache, at::Tensor& v_cache);

/// Attention of one query per row over keys 0..pos[b] of cache row b, read once: q (B, H, D),
/// caches (slots, KVH, max_len, D), query head h reads kv head h / (H / KVH). Scores are
/// q.k rounded to the dtype then scaled by 1/sqrt(D) in float32, softmax in float32, the
/// probabilities rounded to the dtype before the weighted sum. Returns (B, H*D).
at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k_cache,
                            const at::Tensor& v_cache, const at::Tensor& pos);

/// silu(gate) * up: gate, up (B, I), row-contiguous with any row stride (the halves of one
/// fused gate/up output). silu rounds to the dtype before the product. Returns (B, I).
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

}  // namespace asyncrl::fused

#include "runtime/model/fused_decode.hpp"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

// ASYNCRL_CUDA_KERNELS: CMake compiled fused_decode_cuda.cu into this build (a CUDA libtorch and
// nvcc); then CUDA tensors of the dtypes it covers go to those kernels.
#if ASYNCRL_CUDA_KERNELS
#include <c10/cuda/CUDAStream.h>

#include "runtime/model/fused_decode_cuda.hpp"
#endif

namespace asyncrl::fused {

namespace {

// Arithmetic of the statistics: float64 for float64, float32 for everything narrower.
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

bool cpu_dtype(at::ScalarType s) {
  return s == at::kFloat || s == at::kDouble || s == at::kBFloat16 || s == at::kHalf;
}

void check_rows(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.dim() == 2 && t.stride(1) == 1, "fused ", what,
              " must be (rows, cols) with contiguous rows, got sizes ", t.sizes(), " strides ",
              t.strides());
}

#if ASYNCRL_CUDA_KERNELS
cuda::dtype cuda_dtype(const at::Tensor& t) {
  return t.scalar_type() == at::kBFloat16 ? cuda::dtype::bf16 : cuda::dtype::float32;
}
void* stream() {
  return c10::cuda::getCurrentCUDAStream().stream();
}
void check_launch(const char* err, const char* what) {
  TORCH_CHECK(err == nullptr, "fused ", what, " CUDA kernel: ", err);
}
#endif

}  // namespace

bool supported(const at::Tensor& x) {
  const auto s = x.scalar_type();
  if (x.device().is_cpu()) return cpu_dtype(s);
#if ASYNCRL_CUDA_KERNELS
  if (x.device().is_cuda()) return s == at::kFloat || s == at::kBFloat16;
#endif
  return false;
}

bool supported(const at::Tensor& x, int64_t head_dim) {
  if (!supported(x)) return false;
#if ASYNCRL_CUDA_KERNELS
  if (x.device().is_cuda()) return cuda::attention_head_dim_supported(head_dim);
#endif
  return head_dim > 0;
}

std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& residual, const at::Tensor& x,
                                               const at::Tensor& weight_in, double eps) {
  RECORD_FUNCTION("asyncrl::fused_add_rms_norm", std::vector<c10::IValue>());
  check_rows(residual, "add_rms_norm residual");
  if (x.defined()) {
    check_rows(x, "add_rms_norm input");
    TORCH_CHECK(x.sizes() == residual.sizes(), "fused add_rms_norm: ", x.sizes(), " vs ",
                residual.sizes());
  }
  const auto rows = residual.size(0), cols = residual.size(1);
  // The weight in the activations' dtype, as as_compute gives it to the composition.
  auto weight = weight_in.to(residual.scalar_type()).contiguous();
  auto sum = x.defined() ? at::empty_like(residual, at::MemoryFormat::Contiguous) : residual;
  auto norm = at::empty({rows, cols}, residual.options());
#if ASYNCRL_CUDA_KERNELS
  if (residual.is_cuda()) {
    check_launch(
        cuda::add_rms_norm(cuda_dtype(residual), residual.data_ptr(), residual.stride(0),
                           x.defined() ? x.data_ptr() : nullptr, x.defined() ? x.stride(0) : 0,
                           weight.data_ptr(), sum.data_ptr(), norm.data_ptr(), rows, cols,
                           float(eps), stream()),
        "add_rms_norm");
    return {sum, norm};
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, residual.scalar_type(), "fused_add_rms_norm", [&] {
        using acc = acc_t<scalar_t>;
        const auto* r = residual.data_ptr<scalar_t>();
        const auto* xp = x.defined() ? x.data_ptr<scalar_t>() : nullptr;
        const auto* w = weight.data_ptr<scalar_t>();
        auto* s = sum.data_ptr<scalar_t>();
        auto* n = norm.data_ptr<scalar_t>();
        const auto rs = residual.stride(0), xs = x.defined() ? x.stride(0) : 0;
        const auto ss = sum.stride(0);
        at::parallel_for(0, rows, 1, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            acc sq = 0;
            for (int64_t c = 0; c < cols; ++c) {
              // The sum rounds to the dtype (h = x + attn), then its square is accumulated.
              const scalar_t v = xp != nullptr ? scalar_t(acc(r[b * rs + c]) + acc(xp[b * xs + c]))
                                               : r[b * rs + c];
              s[b * ss + c] = v;
              sq += acc(v) * acc(v);
            }
            const acc inv = acc(1) / std::sqrt(sq / acc(cols) + acc(eps));
            for (int64_t c = 0; c < cols; ++c) {
              const scalar_t normed = scalar_t(acc(s[b * ss + c]) * inv);
              n[b * cols + c] = scalar_t(acc(w[c]) * acc(normed));
            }
          }
        });
      });
  return {sum, norm};
}

at::Tensor rope_write_cache(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const at::Tensor& cos_in, const at::Tensor& sin_in,
                            const at::Tensor& pos, at::Tensor& k_cache, at::Tensor& v_cache) {
  RECORD_FUNCTION("asyncrl::fused_rope_write_cache", std::vector<c10::IValue>());
  check_rows(q, "rope q");
  check_rows(k, "rope k");
  check_rows(v, "rope v");
  TORCH_CHECK(k_cache.dim() == 4 && k_cache.is_contiguous() && v_cache.is_contiguous() &&
                  v_cache.sizes() == k_cache.sizes(),
              "fused rope: caches must be contiguous (slots, kv_heads, max_len, head_dim), got ",
              k_cache.sizes(), " and ", v_cache.sizes());
  const auto B = q.size(0), KVH = k_cache.size(1), L = k_cache.size(2), D = k_cache.size(3);
  const auto H = q.size(1) / D;
  TORCH_CHECK(H * D == q.size(1) && k.size(1) == KVH * D && v.size(1) == KVH * D && D % 2 == 0,
              "fused rope: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes(), " for cache ",
              k_cache.sizes());
  TORCH_CHECK(B <= k_cache.size(0) && pos.numel() == B && pos.scalar_type() == at::kLong,
              "fused rope: batch ", B, ", cache slots ", k_cache.size(0), ", pos ", pos.sizes());
  auto cos = cos_in.reshape({B, D}).to(q.scalar_type()).contiguous();
  auto sin = sin_in.reshape({B, D}).to(q.scalar_type()).contiguous();
  auto pos_c = pos.contiguous();
  auto out = at::empty({B, H, D}, q.options());
#if ASYNCRL_CUDA_KERNELS
  if (q.is_cuda()) {
    check_launch(
        cuda::rope_write_cache(cuda_dtype(q), q.data_ptr(), q.stride(0), k.data_ptr(), k.stride(0),
                               v.data_ptr(), v.stride(0), cos.data_ptr(), sin.data_ptr(),
                               pos_c.data_ptr<int64_t>(), k_cache.data_ptr(), v_cache.data_ptr(),
                               out.data_ptr(), B, H, KVH, D, L, stream()),
        "rope_write_cache");
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, q.scalar_type(), "fused_rope_write_cache", [&] {
        const auto* c = cos.data_ptr<scalar_t>();
        const auto* s = sin.data_ptr<scalar_t>();
        const auto* p = pos_c.data_ptr<int64_t>();
        const int64_t half = D / 2;
        // x * cos + rotate_half(x) * sin, rotate_half(x) = (-x2, x1): each product and the
        // sum round to the dtype, as the three elementwise operators of the composition do.
        auto rotate = [&](const scalar_t* x, const scalar_t* cb, const scalar_t* sb, scalar_t* o) {
          for (int64_t d = 0; d < D; ++d) {
            const scalar_t other = d < half ? scalar_t(-acc_t<scalar_t>(x[d + half])) : x[d - half];
            const scalar_t a = x[d] * cb[d];
            const scalar_t b = other * sb[d];
            o[d] = a + b;
          }
        };
        const auto* qp = q.data_ptr<scalar_t>();
        const auto* kp = k.data_ptr<scalar_t>();
        const auto* vp = v.data_ptr<scalar_t>();
        auto* kc = k_cache.data_ptr<scalar_t>();
        auto* vc = v_cache.data_ptr<scalar_t>();
        auto* o = out.data_ptr<scalar_t>();
        at::parallel_for(0, B, 1, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            TORCH_CHECK(p[b] >= 0 && p[b] < L, "fused rope: position ", p[b], " outside cache ", L);
            const auto* cb = c + b * D;
            const auto* sb = s + b * D;
            for (int64_t h = 0; h < H; ++h)
              rotate(qp + b * q.stride(0) + h * D, cb, sb, o + (b * H + h) * D);
            for (int64_t h = 0; h < KVH; ++h) {
              const int64_t at_pos = ((b * KVH + h) * L + p[b]) * D;
              rotate(kp + b * k.stride(0) + h * D, cb, sb, kc + at_pos);
              const auto* vs = vp + b * v.stride(0) + h * D;
              std::copy(vs, vs + D, vc + at_pos);
            }
          }
        });
      });
  return out;
}

at::Tensor decode_attention(const at::Tensor& q_in, const at::Tensor& k_cache,
                            const at::Tensor& v_cache, const at::Tensor& pos) {
  RECORD_FUNCTION("asyncrl::fused_decode_attention", std::vector<c10::IValue>());
  auto q = q_in.contiguous();
  TORCH_CHECK(q.dim() == 3 && k_cache.dim() == 4 && k_cache.is_contiguous() &&
                  v_cache.is_contiguous() && k_cache.size(3) == q.size(2),
              "fused attention: q ", q.sizes(), ", cache ", k_cache.sizes());
  const auto B = q.size(0), H = q.size(1), D = q.size(2);
  const auto KVH = k_cache.size(1), L = k_cache.size(2);
  TORCH_CHECK(H % KVH == 0 && pos.numel() == B, "fused attention: ", H, " heads over ", KVH,
              " kv heads, pos ", pos.sizes());
  const auto G = H / KVH;
  const float scale_div = static_cast<float>(std::sqrt(double(D)));
  auto pos_c = pos.contiguous();
  auto out = at::empty({B, H * D}, q.options());
#if ASYNCRL_CUDA_KERNELS
  if (q.is_cuda()) {
    check_launch(cuda::decode_attention(cuda_dtype(q), q.data_ptr(), k_cache.data_ptr(),
                                        v_cache.data_ptr(), pos_c.data_ptr<int64_t>(),
                                        out.data_ptr(), B, H, KVH, D, L, scale_div, stream()),
                 "decode_attention");
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::kBFloat16, at::kHalf, q.scalar_type(), "fused_decode_attention", [&] {
        using acc = acc_t<scalar_t>;
        const auto* qp = q.data_ptr<scalar_t>();
        const auto* kc = k_cache.data_ptr<scalar_t>();
        const auto* vc = v_cache.data_ptr<scalar_t>();
        const auto* p = pos_c.data_ptr<int64_t>();
        auto* o = out.data_ptr<scalar_t>();
        // A float64 model divides by the float64 root, as the composition's float64 scores do.
        const acc div = std::is_same_v<acc, double> ? acc(std::sqrt(double(D))) : acc(scale_div);
        at::parallel_for(0, B * H, 1, [&](int64_t i0, int64_t i1) {
          std::vector<acc> w;
          std::vector<acc> sum(D);
          for (int64_t i = i0; i < i1; ++i) {
            const int64_t b = i / H, h = i % H, kvh = h / G;
            const int64_t n = p[b] + 1;  // keys 0..pos[b]
            TORCH_CHECK(n >= 1 && n <= L, "fused attention: position ", p[b], " outside cache ", L);
            const auto* qv = qp + (b * H + h) * D;
            const auto* kb = kc + (b * KVH + kvh) * L * D;
            const auto* vb = vc + (b * KVH + kvh) * L * D;
            w.assign(n, acc(0));
            acc m = -std::numeric_limits<acc>::infinity();
            for (int64_t j = 0; j < n; ++j) {
              acc dot = 0;
              for (int64_t d = 0; d < D; ++d)
                dot += acc(qv[d]) * acc(kb[j * D + d]);
              w[j] = acc(scalar_t(dot)) / div;  // the score matmul's output is in the dtype
              m = std::max(m, w[j]);
            }
            acc z = 0;
            for (int64_t j = 0; j < n; ++j) {
              w[j] = std::exp(w[j] - m);
              z += w[j];
            }
            std::fill(sum.begin(), sum.end(), acc(0));
            for (int64_t j = 0; j < n; ++j) {
              const acc pj = acc(scalar_t(w[j] / z));  // probabilities in the values' dtype
              for (int64_t d = 0; d < D; ++d)
                sum[d] += pj * acc(vb[j * D + d]);
            }
            for (int64_t d = 0; d < D; ++d)
              o[(b * H + h) * D + d] = scalar_t(sum[d]);
          }
        });
      });
  return out;
}

at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up) {
  RECORD_FUNCTION("asyncrl::fused_silu_mul", std::vector<c10::IValue>());
  check_rows(gate, "silu_mul gate");
  check_rows(up, "silu_mul up");
  TORCH_CHECK(gate.sizes() == up.sizes(), "fused silu_mul: ", gate.sizes(), " vs ", up.sizes());
  const auto rows = gate.size(0), cols = gate.size(1);
  auto out = at::empty({rows, cols}, gate.options());
#if ASYNCRL_CUDA_KERNELS
  if (gate.is_cuda()) {
    check_launch(cuda::silu_mul(cuda_dtype(gate), gate.data_ptr(), gate.stride(0), up.data_ptr(),
                                up.stride(0), out.data_ptr(), rows, cols, stream()),
                 "silu_mul");
    return out;
  }
#endif
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, gate.scalar_type(), "fused_silu_mul",
                                  [&] {
                                    using acc = acc_t<scalar_t>;
                                    const auto* g = gate.data_ptr<scalar_t>();
                                    const auto* u = up.data_ptr<scalar_t>();
                                    auto* o = out.data_ptr<scalar_t>();
                                    const auto gs = gate.stride(0), us = up.stride(0);
                                    at::parallel_for(0, rows, 1, [&](int64_t b0, int64_t b1) {
                                      for (int64_t b = b0; b < b1; ++b)
                                        for (int64_t c = 0; c < cols; ++c) {
                                          const acc x = acc(g[b * gs + c]);
                                          const scalar_t s = scalar_t(x / (acc(1) + std::exp(-x)));
                                          o[b * cols + c] = scalar_t(acc(s) * acc(u[b * us + c]));
                                        }
                                    });
                                  });
  return out;
}

}  // namespace asyncrl::fused

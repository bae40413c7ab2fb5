#include "runtime/model/batch_invariant.hpp"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

// Built with -ffp-contract=off (CMakeLists.txt): a multiply-add fused in one place and not in
// another would give two orders of rounding for the same dot product.

namespace asyncrl {

namespace {

// The lanes of one dot product: 32 bytes, whatever vector unit the compiler targets.
template <typename T>
struct lanes;
template <>
struct lanes<float> {
  typedef float v __attribute__((vector_size(32)));
  static constexpr int n = 8;
};
template <>
struct lanes<double> {
  typedef double v __attribute__((vector_size(32)));
  static constexpr int n = 4;
};

// By reference, not by value: without AVX a 32-byte vector has no register to return in.
template <typename T>
inline void load(typename lanes<T>::v& r, const T* p) {
  std::memcpy(&r, p, sizeof r);
}

// Lanes added pairwise: (0+4, 1+5, 2+6, 3+7), then (0+2, 1+3), then 0+1.
template <typename T>
inline T reduce_lanes(const typename lanes<T>::v& a) {
  T s[lanes<T>::n];
  std::memcpy(s, &a, sizeof a);
  for (int w = lanes<T>::n / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i)
      s[i] = s[i] + s[i + w];
  return s[0];
}

// y[r][c] = dot(x_r, w_c) for R rows of x and C rows of w (each of length K, contiguous).
// Every element gets the same sequence of operations whatever R and C are.
template <typename T, int R, int C>
inline void dot_tile(const T* x, const T* w, int64_t K, T* y, int64_t ldy) {
  using V = typename lanes<T>::v;
  constexpr int L = lanes<T>::n;
  V acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      acc[r][c] = V{};
  const int64_t KB = K - K % L;
  for (int64_t k = 0; k < KB; k += L) {
    V xv[R], wv[C];
    for (int r = 0; r < R; ++r)
      load<T>(xv[r], x + r * K + k);
    for (int c = 0; c < C; ++c)
      load<T>(wv[c], w + c * K + k);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        acc[r][c] += xv[r] * wv[c];
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      T s = reduce_lanes<T>(acc[r][c]);
      for (int64_t k = KB; k < K; ++k)
        s += x[r * K + k] * w[c * K + k];
      y[r * ldy + c] = s;
    }
}

// y (M, N) = x (M, K) @ w (N, K)^T over 64 x 64 output blocks (both operand blocks stay in
// cache); threads take whole blocks, so each element is one thread's.
template <typename T>
void gemm_nt(const T* x, const T* w, int64_t M, int64_t N, int64_t K, T* y) {
  constexpr int64_t kBlock = 64;
  const int64_t row_blocks = (M + kBlock - 1) / kBlock, col_blocks = (N + kBlock - 1) / kBlock;
  at::parallel_for(0, row_blocks * col_blocks, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t r_lo = (blk / col_blocks) * kBlock, r_hi = std::min(M, r_lo + kBlock);
      const int64_t c_lo = (blk % col_blocks) * kBlock, c_hi = std::min(N, c_lo + kBlock);
      int64_t c = c_lo;
      for (; c + 2 <= c_hi; c += 2) {
        int64_t r = r_lo;
        for (; r + 2 <= r_hi; r += 2)
          dot_tile<T, 2, 2>(x + r * K, w + c * K, K, y + r * N + c, N);
        for (; r < r_hi; ++r)
          dot_tile<T, 1, 2>(x + r * K, w + c * K, K, y + r * N + c, N);
      }
      for (; c < c_hi; ++c)
        for (int64_t r = r_lo; r < r_hi; ++r)
          dot_tile<T, 1, 1>(x + r * K, w + c * K, K, y + r * N + c, N);
    }
  });
}

void check_cpu(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu(), what,
              ": the batch-invariant kernels (rollout.batch_invariant) run on the CPU only; got "
              "a tensor on ",
              t.device());
}

// The accumulation dtype: float64 for float64, else float32.
at::ScalarType acc_type(const at::Tensor& t) {
  return t.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
}

at::Tensor widened(const at::Tensor& t) {
  return t.to(acc_type(t)).contiguous();
}

key_lists from_vectors(const std::vector<int64_t>& ptr, const std::vector<int64_t>& idx) {
  auto opts = at::TensorOptions().dtype(at::kLong);
  return {at::tensor(ptr, opts), idx.empty() ? at::empty({0}, opts) : at::tensor(idx, opts)};
}

}  // namespace

at::Tensor bi_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  check_cpu(x, "bi_linear");
  const int64_t K = x.size(-1), N = w.size(0);
  TORCH_CHECK(w.dim() == 2 && w.size(1) == K, "bi_linear: x ", x.sizes(), " and w ", w.sizes(),
              " do not agree");
  auto x2 = widened(x).view({-1, K});
  auto w2 = w.to(x2.scalar_type()).contiguous();
  const int64_t M = x2.size(0);
  auto y = at::empty({M, N}, x2.options());
  if (M > 0 && N > 0)
    AT_DISPATCH_FLOATING_TYPES(x2.scalar_type(), "bi_linear", [&] {
      gemm_nt<scalar_t>(x2.data_ptr<scalar_t>(), w2.data_ptr<scalar_t>(), M, N, K,
                        y.data_ptr<scalar_t>());
    });
  if (b.defined()) y.add_(b.to(y.scalar_type()));
  auto shape = x.sizes().vec();
  shape.back() = N;
  return y.view(shape).to(x.scalar_type());
}

at::Tensor bi_rms_norm(const at::Tensor& x, const at::Tensor& w, double eps) {
  check_cpu(x, "bi_rms_norm");
  const int64_t D = x.size(-1);
  auto xa = widened(x).view({-1, D});
  auto y = at::empty_like(xa);
  const int64_t rows = xa.size(0);
  AT_DISPATCH_FLOATING_TYPES(xa.scalar_type(), "bi_rms_norm", [&] {
    const auto* in = xa.data_ptr<scalar_t>();
    auto* out = y.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 16, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const scalar_t* v = in + r * D;
        scalar_t ss = 0;
        for (int64_t i = 0; i < D; ++i)
          ss += v[i] * v[i];
        const scalar_t inv =
            scalar_t(1) / std::sqrt(ss / static_cast<scalar_t>(D) + static_cast<scalar_t>(eps));
        for (int64_t i = 0; i < D; ++i)
          out[r * D + i] = v[i] * inv;
      }
    });
  });
  return w * y.view(x.sizes()).to(x.scalar_type());
}

std::pair<at::Tensor, at::Tensor> bi_cos_sin(const at::Tensor& angles) {
  check_cpu(angles, "bi_cos_sin");
  auto a = widened(angles);
  auto c = at::empty_like(a), s = at::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "bi_cos_sin", [&] {
    const auto* in = a.data_ptr<scalar_t>();
    auto* co = c.data_ptr<scalar_t>();
    auto* si = s.data_ptr<scalar_t>();
    for (int64_t i = 0, n = a.numel(); i < n; ++i) {
      co[i] = std::cos(in[i]);
      si[i] = std::sin(in[i]);
    }
  });
  return {c.to(angles.scalar_type()), s.to(angles.scalar_type())};
}

at::Tensor bi_silu_mul(const at::Tensor& g, const at::Tensor& u) {
  check_cpu(g, "bi_silu_mul");
  auto ga = widened(g);
  auto s = at::empty_like(ga);
  AT_DISPATCH_FLOATING_TYPES(ga.scalar_type(), "bi_silu_mul", [&] {
    const auto* in = ga.data_ptr<scalar_t>();
    auto* out = s.data_ptr<scalar_t>();
    at::parallel_for(0, ga.numel(), 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        out[i] = in[i] / (scalar_t(1) + std::exp(-in[i]));
    });
  });
  return s.to(g.scalar_type()) * u;
}

key_lists keys_from_mask(const at::Tensor& mask) {
  TORCH_CHECK(mask.dim() == 3 && mask.scalar_type() == at::kBool,
              "keys_from_mask: bool (B, T, S), got ", mask.sizes());
  auto m = mask.to(at::kCPU).contiguous();
  const int64_t Q = m.size(0) * m.size(1), S = m.size(2);
  const bool* p = m.data_ptr<bool>();
  std::vector<int64_t> ptr(Q + 1, 0), idx;
  for (int64_t q = 0; q < Q; ++q) {
    for (int64_t j = 0; j < S; ++j)
      if (p[q * S + j]) idx.push_back(j);
    ptr[q + 1] = static_cast<int64_t>(idx.size());
  }
  return from_vectors(ptr, idx);
}

key_lists keys_causal(int64_t B, int64_t T, int64_t S) {
  std::vector<int64_t> ptr(B * T + 1, 0), idx;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t j = 0; j <= t + S - T && j < S; ++j)
        idx.push_back(j);
      ptr[b * T + t + 1] = static_cast<int64_t>(idx.size());
    }
  return from_vectors(ptr, idx);
}

key_lists keys_from_segments(const segment_plan& plan) {
  const int64_t T = plan.tokens;
  std::vector<std::vector<int64_t>> per_token(static_cast<size_t>(T));
  for (const auto& bk : plan.buckets) {
    auto q_idx = bk.q_idx.to(at::kCPU).contiguous();
    auto k_idx = bk.k_idx.to(at::kCPU).contiguous();
    auto mask = bk.mask.to(at::kCPU).contiguous();
    auto keep = bk.keep.to(at::kCPU).contiguous();
    const auto* qi = q_idx.data_ptr<int64_t>();
    const auto* ki = k_idx.data_ptr<int64_t>();
    const bool* mp = mask.data_ptr<bool>();
    const auto* kp = keep.data_ptr<int64_t>();
    for (int64_t n = 0; n < keep.numel(); ++n) {
      const int64_t slot = kp[n], block = slot / bk.q_len;
      auto& keys = per_token[static_cast<size_t>(qi[slot])];
      for (int64_t j = 0; j < bk.k_len; ++j)
        if (mp[slot * bk.k_len + j]) keys.push_back(ki[block * bk.k_len + j]);
    }
  }
  std::vector<int64_t> ptr(T + 1, 0), idx;
  for (int64_t t = 0; t < T; ++t) {
    idx.insert(idx.end(), per_token[t].begin(), per_token[t].end());
    ptr[t + 1] = static_cast<int64_t>(idx.size());
  }
  return from_vectors(ptr, idx);
}

at::Tensor bi_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const key_lists& keys) {
  check_cpu(q, "bi_attention");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3);
  const int64_t KVH = k.size(1), S = k.size(2), G = H / KVH;
  TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == B && k.size(3) == D && H % KVH == 0,
              "bi_attention: q ", q.sizes(), ", k ", k.sizes(), ", v ", v.sizes());
  TORCH_CHECK(keys.ptr.numel() == B * T + 1, "bi_attention: key lists for ", keys.ptr.numel() - 1,
              " queries, the batch has ", B * T);
  auto qa = widened(q), ka = widened(k.to(q.scalar_type())), va = widened(v.to(q.scalar_type()));
  auto out = at::empty({B, T, H, D}, qa.options());
  const auto* ptr = keys.ptr.data_ptr<int64_t>();
  const auto* idx = keys.idx.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(qa.scalar_type(), "bi_attention", [&] {
    const auto* Q = qa.data_ptr<scalar_t>();
    const auto* K = ka.data_ptr<scalar_t>();
    const auto* Vv = va.data_ptr<scalar_t>();
    auto* O = out.data_ptr<scalar_t>();
    const scalar_t scale = scalar_t(1) / std::sqrt(static_cast<scalar_t>(D));
    at::parallel_for(0, B * T * H, 4, [&](int64_t r0, int64_t r1) {
      std::vector<scalar_t> score, acc(static_cast<size_t>(D));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t h = r % H, bt = r / H, b = bt / T, t = bt % T, kv = h / G;
        const scalar_t* qv = Q + ((b * H + h) * T + t) * D;
        const scalar_t* kb = K + (b * KVH + kv) * S * D;
        const scalar_t* vb = Vv + (b * KVH + kv) * S * D;
        scalar_t* o = O + (bt * H + h) * D;
        const int64_t n = ptr[bt + 1] - ptr[bt];
        const int64_t* key = idx + ptr[bt];
        score.resize(static_cast<size_t>(n));
        scalar_t m = -std::numeric_limits<scalar_t>::infinity();
        for (int64_t j = 0; j < n; ++j) {
          TORCH_CHECK(key[j] >= 0 && key[j] < S, "bi_attention: key ", key[j], " outside ", S);
          const scalar_t* kj = kb + key[j] * D;
          scalar_t s = 0;
          for (int64_t d = 0; d < D; ++d)
            s += qv[d] * kj[d];
          score[j] = s * scale;
          m = std::max(m, score[j]);
        }
        std::fill(acc.begin(), acc.end(), scalar_t(0));
        scalar_t l = 0;
        for (int64_t j = 0; j < n; ++j) {
          const scalar_t p = std::exp(score[j] - m);
          l += p;
          const scalar_t* vj = vb + key[j] * D;
          for (int64_t d = 0; d < D; ++d)
            acc[d] += p * vj[d];
        }
        for (int64_t d = 0; d < D; ++d)
          o[d] = n > 0 ? acc[d] / l : scalar_t(0);
      }
    });
  });
  return out.view({B, T, H * D}).to(q.scalar_type());
}

at::Tensor bi_token_logprobs(const at::Tensor& logits, const at::Tensor& tokens,
                             const at::Tensor& temperature) {
  check_cpu(logits, "bi_token_logprobs");
  TORCH_CHECK(logits.dim() == 2 && logits.scalar_type() == at::kFloat,
              "bi_token_logprobs: float32 (N, V) logits, got ", logits.sizes(), " ",
              logits.scalar_type());
  const int64_t N = logits.size(0), V = logits.size(1);
  TORCH_CHECK(tokens.numel() == N && temperature.numel() == N,
              "bi_token_logprobs: one token and one temperature per row");
  auto x = logits.contiguous();
  auto tok = tokens.to(at::kLong).contiguous();
  auto temp = temperature.to(at::kFloat).contiguous();
  auto out = at::empty({N}, x.options());
  const float* X = x.data_ptr<float>();
  const int64_t* tk = tok.data_ptr<int64_t>();
  const float* tp = temp.data_ptr<float>();
  float* o = out.data_ptr<float>();
  at::parallel_for(0, N, 4, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = X + r * V;
      const float t = tp[r];
      TORCH_CHECK(tk[r] >= 0 && tk[r] < V, "bi_token_logprobs: token ", tk[r], " outside ", V);
      float m = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < V; ++j)
        m = std::max(m, row[j] / t);
      float s = 0;
      for (int64_t j = 0; j < V; ++j)
        s += std::exp(row[j] / t - m);
      o[r] = (row[tk[r]] / t - m) - std::log(s);
    }
  });
  return out;
}

}  // namespace asyncrl

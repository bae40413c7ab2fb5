// The decode step's CUDA kernels (fused_decode_cuda.hpp). Torch-free: nvcc sees only CUDA's own
// headers. Element types: float and __nv_bfloat16, with float arithmetic; products and sums use
// the _rn intrinsics where the ATen composition rounds each operation on its own, so that nvcc
// does not contract them into FMAs that the composition does not do.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "runtime/model/fused_decode_cuda.hpp"

namespace asyncrl::fused::cuda {

namespace {

template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

// x rounded to T and back: where the composition stores an intermediate in the dtype.
template <typename T>
__device__ __forceinline__ float round_to(float x) {
  return to_f<T>(from_f<T>(x));
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

constexpr int kNormThreads = 256;

// One block per row: the sum (rounded to T), its mean square over the block, then the norm.
template <typename T>
__global__ void add_rms_norm_kernel(const T* residual, int64_t rs, const T* x, int64_t xs,
                                    const T* w, T* sum, T* norm, int64_t cols, float eps) {
  const int64_t row = blockIdx.x;
  const T* r = residual + row * rs;
  T* s = sum + row * cols;
  float sq = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v =
        x != nullptr ? round_to<T>(__fadd_rn(to_f(r[c]), to_f(x[row * xs + c]))) : to_f(r[c]);
    if (x != nullptr) s[c] = from_f<T>(v);
    sq = __fadd_rn(sq, __fmul_rn(v, v));
  }
  __shared__ float partial[kNormThreads / 32];
  sq = warp_sum(sq);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sq;
  __syncthreads();
  __shared__ float inv;
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int i = 0; i < kNormThreads / 32; ++i)
      t += partial[i];
    inv = 1.f / sqrtf(__fadd_rn(t / float(cols), eps));
  }
  __syncthreads();
  const T* src = x != nullptr ? s : r;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float normed = round_to<T>(__fmul_rn(to_f(src[c]), inv));
    norm[row * cols + c] = from_f<T>(__fmul_rn(to_f(w[c]), normed));
  }
}

// One block per row: every element of q and k rotated, v copied into the cache.
template <typename T>
__global__ void rope_kernel(const T* q, int64_t qs, const T* k, int64_t ks, const T* v, int64_t vs,
                            const T* cosb, const T* sinb, const int64_t* pos, T* kc, T* vc,
                            T* q_out, int64_t H, int64_t KVH, int64_t D, int64_t L) {
  const int64_t b = blockIdx.x, half = D / 2, p = pos[b];
  const T* c = cosb + b * D;
  const T* s = sinb + b * D;
  const int64_t total = (H + 2 * KVH) * D;
  for (int64_t i = threadIdx.x; i < total; i += blockDim.x) {
    const int64_t head = i / D, d = i % D;
    if (head >= H + KVH) {  // v
      const int64_t h = head - H - KVH;
      vc[((b * KVH + h) * L + p) * D + d] = v[b * vs + h * D + d];
      continue;
    }
    const T* x = head < H ? q + b * qs + head * D : k + b * ks + (head - H) * D;
    const float other = d < half ? -to_f(x[d + half]) : to_f(x[d - half]);
    const float a = round_to<T>(__fmul_rn(to_f(x[d]), to_f(c[d])));
    const float bb = round_to<T>(__fmul_rn(other, to_f(s[d])));
    const T out = from_f<T>(__fadd_rn(a, bb));
    if (head < H)
      q_out[(b * H + head) * D + d] = out;
    else
      kc[((b * KVH + head - H) * L + p) * D + d] = out;
  }
}

constexpr int kAttnWarps = 4;
constexpr int kMaxGroup = 8;  // query heads of one kv head per block (more: several blocks)

// One block per (row, kv head, group of up to kMaxGroup query heads): each warp takes every
// kAttnWarps-th key, scores it against the group's queries (lane l holds dims l, l+32, ...),
// and keeps an online softmax; the warps' partial results are merged at the end. Keys and
// values of the row are read once per block.
template <typename T, int DPL>
__global__ void decode_attention_kernel(const T* q, const T* kc, const T* vc, const int64_t* pos,
                                        T* out, int64_t H, int64_t KVH, int64_t L, float scale) {
  constexpr int D = DPL * 32;
  const int64_t b = blockIdx.x, kvh = blockIdx.y;
  const int64_t G = H / KVH;
  const int64_t g0 = int64_t(blockIdx.z) * kMaxGroup;
  const int ng = int(min(int64_t(kMaxGroup), G - g0));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n = pos[b] + 1;
  const T* kb = kc + (b * KVH + kvh) * L * D;
  const T* vb = vc + (b * KVH + kvh) * L * D;

  float qv[kMaxGroup][DPL], acc[kMaxGroup][DPL], m[kMaxGroup], l[kMaxGroup];
  for (int g = 0; g < kMaxGroup; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
    for (int e = 0; e < DPL; ++e) {
      acc[g][e] = 0.f;
      qv[g][e] = g < ng ? to_f(q[(b * H + kvh * G + g0 + g) * D + lane + 32 * e]) : 0.f;
    }
  }
  for (int64_t j = warp; j < n; j += kAttnWarps) {
    float kv[DPL], vv[DPL];
    for (int e = 0; e < DPL; ++e) {
      kv[e] = to_f(kb[j * D + lane + 32 * e]);
      vv[e] = to_f(vb[j * D + lane + 32 * e]);
    }
    for (int g = 0; g < ng; ++g) {
      float dot = 0.f;
      for (int e = 0; e < DPL; ++e)
        dot = fmaf(qv[g][e], kv[e], dot);
      const float sc = round_to<T>(warp_sum(dot)) / scale;
      const float mn = fmaxf(m[g], sc);
      const float corr = __expf(m[g] - mn), p = __expf(sc - mn);
      l[g] = l[g] * corr + p;
      for (int e = 0; e < DPL; ++e)
        acc[g][e] = acc[g][e] * corr + p * vv[e];
      m[g] = mn;
    }
  }
  __shared__ float sm[kAttnWarps][kMaxGroup], sl[kAttnWarps][kMaxGroup];
  __shared__ float sacc[kAttnWarps][kMaxGroup][D];
  for (int g = 0; g < ng; ++g) {
    if (lane == 0) {
      sm[warp][g] = m[g];
      sl[warp][g] = l[g];
    }
    for (int e = 0; e < DPL; ++e)
      sacc[warp][g][lane + 32 * e] = acc[g][e];
  }
  __syncthreads();
  for (int i = threadIdx.x; i < ng * D; i += blockDim.x) {
    const int g = i / D, d = i % D;
    float mx = -INFINITY;
    for (int w = 0; w < kAttnWarps; ++w)
      mx = fmaxf(mx, sm[w][g]);
    float z = 0.f, o = 0.f;
    for (int w = 0; w < kAttnWarps; ++w) {
      if (sm[w][g] == -INFINITY) continue;  // a warp that saw no key
      const float f = __expf(sm[w][g] - mx);
      z += sl[w][g] * f;
      o += sacc[w][g][d] * f;
    }
    out[(b * H + kvh * G + g0 + g) * D + d] = from_f<T>(o / z);
  }
}

template <typename T>
__global__ void silu_mul_kernel(const T* gate, int64_t gs, const T* up, int64_t us, T* out,
                                int64_t rows, int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / cols, c = i % cols;
    const float x = to_f(gate[r * gs + c]);
    const float s = round_to<T>(x / (1.f + expf(-x)));
    out[i] = from_f<T>(__fmul_rn(s, to_f(up[r * us + c])));
  }
}

const char* launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

template <typename T>
void attention_launch(const void* q, const void* kc, const void* vc, const int64_t* pos, void* out,
                      int64_t B, int64_t H, int64_t KVH, int64_t D, int64_t L, float scale,
                      cudaStream_t st, const char*& err) {
  const int64_t G = H / KVH;
  const dim3 grid(unsigned(B), unsigned(KVH), unsigned((G + kMaxGroup - 1) / kMaxGroup));
  const dim3 block(kAttnWarps * 32);
  auto go = [&](auto kernel) {
    kernel<<<grid, block, 0, st>>>(static_cast<const T*>(q), static_cast<const T*>(kc),
                                   static_cast<const T*>(vc), pos, static_cast<T*>(out), H, KVH, L,
                                   scale);
  };
  switch (D) {
    case 32:
      go(decode_attention_kernel<T, 1>);
      break;
    case 64:
      go(decode_attention_kernel<T, 2>);
      break;
    case 96:
      go(decode_attention_kernel<T, 3>);
      break;
    case 128:
      go(decode_attention_kernel<T, 4>);
      break;
    default:
      err = "head_dim must be 32, 64, 96 or 128";
      return;
  }
  err = launched();
}

}  // namespace

bool attention_head_dim_supported(int64_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 96 || head_dim == 128;
}

const char* add_rms_norm(dtype t, const void* residual, int64_t residual_stride, const void* x,
                         int64_t x_stride, const void* weight, void* sum, void* norm, int64_t rows,
                         int64_t cols, float eps, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (rows == 0) return nullptr;
  if (t == dtype::bf16)
    add_rms_norm_kernel<__nv_bfloat16><<<unsigned(rows), kNormThreads, 0, st>>>(
        static_cast<const __nv_bfloat16*>(residual), residual_stride,
        static_cast<const __nv_bfloat16*>(x), x_stride, static_cast<const __nv_bfloat16*>(weight),
        static_cast<__nv_bfloat16*>(sum), static_cast<__nv_bfloat16*>(norm), cols, eps);
  else
    add_rms_norm_kernel<float><<<unsigned(rows), kNormThreads, 0, st>>>(
        static_cast<const float*>(residual), residual_stride, static_cast<const float*>(x),
        x_stride, static_cast<const float*>(weight), static_cast<float*>(sum),
        static_cast<float*>(norm), cols, eps);
  return launched();
}

const char* rope_write_cache(dtype t, const void* q, int64_t q_stride, const void* k,
                             int64_t k_stride, const void* v, int64_t v_stride, const void* cos,
                             const void* sin, const int64_t* pos, void* k_cache, void* v_cache,
                             void* q_out, int64_t batch, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, int64_t max_len, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (batch == 0) return nullptr;
  auto go = [&](auto tag) {
    using T = decltype(tag);
    rope_kernel<T><<<unsigned(batch), 256, 0, st>>>(
        static_cast<const T*>(q), q_stride, static_cast<const T*>(k), k_stride,
        static_cast<const T*>(v), v_stride, static_cast<const T*>(cos), static_cast<const T*>(sin),
        pos, static_cast<T*>(k_cache), static_cast<T*>(v_cache), static_cast<T*>(q_out), heads,
        kv_heads, head_dim, max_len);
  };
  if (t == dtype::bf16)
    go(__nv_bfloat16{});
  else
    go(float{});
  return launched();
}

const char* decode_attention(dtype t, const void* q, const void* k_cache, const void* v_cache,
                             const int64_t* pos, void* out, int64_t batch, int64_t heads,
                             int64_t kv_heads, int64_t head_dim, int64_t max_len, float scale,
                             void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (batch == 0) return nullptr;
  const char* err = nullptr;
  if (t == dtype::bf16)
    attention_launch<__nv_bfloat16>(q, k_cache, v_cache, pos, out, batch, heads, kv_heads, head_dim,
                                    max_len, scale, st, err);
  else
    attention_launch<float>(q, k_cache, v_cache, pos, out, batch, heads, kv_heads, head_dim,
                            max_len, scale, st, err);
  return err;
}

const char* silu_mul(dtype t, const void* gate, int64_t gate_stride, const void* up,
                     int64_t up_stride, void* out, int64_t rows, int64_t cols, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int64_t total = rows * cols;
  if (total == 0) return nullptr;
  const unsigned blocks = unsigned(std::min<int64_t>((total + 255) / 256, 65535));
  if (t == dtype::bf16)
    silu_mul_kernel<__nv_bfloat16><<<blocks, 256, 0, st>>>(
        static_cast<const __nv_bfloat16*>(gate), gate_stride, static_cast<const __nv_bfloat16*>(up),
        up_stride, static_cast<__nv_bfloat16*>(out), rows, cols);
  else
    silu_mul_kernel<float><<<blocks, 256, 0, st>>>(static_cast<const float*>(gate), gate_stride,
                                                   static_cast<const float*>(up), up_stride,
                                                   static_cast<float*>(out), rows, cols);
  return launched();
}

}  // namespace asyncrl::fused::cuda

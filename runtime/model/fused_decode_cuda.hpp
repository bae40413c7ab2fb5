#pragma once

// Launchers of the decode step's CUDA kernels (fused_decode_cuda.cu). Torch-free, so that nvcc
// compiles the kernels without libtorch's headers: tensors travel as pointers, sizes and row
// strides (in elements), the stream as the cudaStream_t it is. Each returns nullptr, or the
// CUDA error of its launch. Only fused_decode.cpp calls them (fused_decode.hpp says what each
// computes); they exist in a build with ASYNCRL_CUDA_KERNELS.

#include <cstdint>

namespace asyncrl::fused::cuda {

enum class dtype : uint8_t { float32, bf16 };

/// The head sizes decode_attention has a kernel for.
bool attention_head_dim_supported(int64_t head_dim);

const char* add_rms_norm(dtype t, const void* residual, int64_t residual_stride, const void* x,
                         int64_t x_stride, const void* weight, void* sum, void* norm, int64_t rows,
                         int64_t cols, float eps, void* stream);

const char* rope_write_cache(dtype t, const void* q, int64_t q_stride, const void* k,
                             int64_t k_stride, const void* v, int64_t v_stride, const void* cos,
                             const void* sin, const int64_t* pos, void* k_cache, void* v_cache,
                             void* q_out, int64_t batch, int64_t heads, int64_t kv_heads,
                             int64_t head_dim, int64_t max_len, void* stream);

const char* decode_attention(dtype t, const void* q, const void* k_cache, const void* v_cache,
                             const int64_t* pos, void* out, int64_t batch, int64_t heads,
                             int64_t kv_heads, int64_t head_dim, int64_t max_len, float scale,
                             void* stream);

const char* silu_mul(dtype t, const void* gate, int64_t gate_stride, const void* up,
                     int64_t up_stride, void* out, int64_t rows, int64_t cols, void* stream);

}  // namespace asyncrl::fused::cuda

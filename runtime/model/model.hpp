#pragma once

// The Qwen2/Llama decoder-only transformer. This header pulls in torch; include it only from
// the few .cpp files that do tensor work.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/model/batch_invariant.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/precision.hpp"
#include "runtime/model/segment_attention.hpp"

namespace asyncrl {

/// Slot-major key/value cache for continuous batching. Rows 0..n-1 are the live sequences;
/// k[l], v[l] are (slots, kv_heads, max_len, head_dim), keys stored after RoPE, in the model's
/// compute dtype (bf16 rollouts keep a bf16 cache: half the memory of float32).
struct kv_cache {
  std::vector<torch::Tensor> k, v;
  int64_t slots = 0;
  int64_t max_len = 0;

  kv_cache() = default;
  kv_cache(const model_config& cfg, int64_t slots, int64_t max_len, torch::Device device,
           torch::ScalarType dtype = torch::kFloat32);
  /// Copies row `from` over row `to` in every layer (swap-remove on finish).
  void move_row(int64_t from, int64_t to);
  /// Writes the first `len` positions of `src_k/src_v[l][src]` ((B, kv_heads, T, head_dim)
  /// per layer) into row `row`.
  void write_prefix(int64_t row, const std::vector<torch::Tensor>& src_k,
                    const std::vector<torch::Tensor>& src_v, int64_t src, int64_t len);
};

/// RMSNorm: x * rsqrt(mean(x^2) + eps) * weight, the statistics computed in float32.
class RMSNormImpl : public torch::nn::Module {
 public:
  RMSNormImpl(int64_t dim, double eps);
  torch::Tensor forward(const torch::Tensor& x);
  /// The same function by the batch-invariant kernels (no gradient).
  torch::Tensor forward_invariant(const torch::Tensor& x);
  double eps() const { return eps_; }
  torch::Tensor weight;

 private:
  double eps_;
};
TORCH_MODULE(RMSNorm);

/// What the attention of one forward pass needs besides x: rotary tables, the mask, and in
/// decode mode the cache to write into and read from.
struct attention_inputs {
  torch::Tensor cos, sin;     // (B, 1, T, head_dim), in the compute dtype
  torch::Tensor mask;         // bool (B, 1, 1, T, Tk) true = attend; undefined = causal
  kv_cache* cache = nullptr;  // decode: T == 1, rows 0..B-1
  torch::Tensor cache_pos;    // decode: (B,) int64 position written for each row
  int64_t cache_span = 0;     // decode: keys 0..cache_span-1 are read
  int64_t layer = 0;
  std::vector<torch::Tensor>* k_out = nullptr;  // prefill: collect (B, kv_heads, T, head_dim)
  std::vector<torch::Tensor>* v_out = nullptr;
  const segment_plan* segments = nullptr;  // one padding-free row (B = 1): per-block attention
  /// Decode by the fused kernels (fused_decode.hpp): CausalLMImpl::fused_decode, and the
  /// activations' dtype and device have them. No mask: row b reads keys 0..cache_pos[b].
  bool fused = false;
  /// The batch-invariant kernels (CausalLMImpl::batch_invariant), with the keys each query
  /// sees in the order every path visits them.
  bool invariant = false;
  key_lists keys;
};

/// Grouped-query self-attention with Qwen2's optional q/k/v biases.
class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const model_config& cfg);
  torch::Tensor forward(const torch::Tensor& x, const attention_inputs& in);  // (B, T, hidden)
  /// One fused decode step: x (B, hidden) normed -> (B, hidden), the cache written.
  torch::Tensor decode_fused(const torch::Tensor& x, const attention_inputs& in);
  /// Makes q/k/v_proj's weights (and biases) views of one (q + 2 kv, hidden) tensor, so that a
  /// forward without gradients runs one matmul for the three; values unchanged.
  void pack();
  /// Whether the parameters still are those views (a load that re-points them undoes it).
  bool packed() const;
  torch::nn::Linear q_proj{nullptr}, k_proj{nullptr}, v_proj{nullptr}, o_proj{nullptr};

 private:
  // x (B, T, hidden) -> (B, T, (heads + 2 kv_heads) * head_dim): q, k, v side by side.
  torch::Tensor qkv(const torch::Tensor& x) const;
  int64_t heads_, kv_heads_, head_dim_;
  torch::Tensor qkv_weight_, qkv_bias_;  // the packed storage (not registered: no new names)
};
TORCH_MODULE(Attention);

/// SiLU-gated MLP: down(silu(gate(x)) * up(x)).
class MLPImpl : public torch::nn::Module {
 public:
  explicit MLPImpl(const model_config& cfg);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor forward_invariant(const torch::Tensor& x);  // batch-invariant kernels
  /// x (B, hidden) -> (B, hidden) by the fused silu * up kernel.
  torch::Tensor decode_fused(const torch::Tensor& x);
  /// gate_proj and up_proj's weights as views of one (2 * intermediate, hidden) tensor.
  void pack();
  bool packed() const;
  torch::nn::Linear gate_proj{nullptr}, up_proj{nullptr}, down_proj{nullptr};

 private:
  torch::Tensor gate_up_weight_;
};
TORCH_MODULE(MLP);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const model_config& cfg);
  torch::Tensor forward(const torch::Tensor& x, const attention_inputs& in);
  Attention self_attn{nullptr};
  MLP mlp{nullptr};
  RMSNorm input_layernorm{nullptr}, post_attention_layernorm{nullptr};
};
TORCH_MODULE(DecoderLayer);

/// Embedding, decoder stack and final norm; parameter names follow HF (`embed_tokens`, ...).
class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const model_config& cfg);
  /// ids, pos: (B, T) int64. Returns hidden states (B, T, hidden) after the final norm, in
  /// `compute` (undefined: the embedding's dtype).
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& pos, attention_inputs& in,
                        std::optional<torch::ScalarType> compute = std::nullopt);
  torch::nn::Embedding embed_tokens{nullptr};
  torch::nn::ModuleList layers{nullptr};
  RMSNorm norm{nullptr};
  /// Activation checkpointing: in a forward with gradients, keep only each decoder layer's
  /// input and recompute the layer in the backward (about one more forward of compute for a
  /// fraction of the activation memory). The same gradients (tested).
  bool checkpoint_layers = false;

 private:
  // The decoder stack of one fused decode step: h (B, 1, hidden) -> after the final norm.
  torch::Tensor decode_fused(const torch::Tensor& h, attention_inputs& in);
  torch::Tensor inv_freq_;  // (head_dim / 2,)
  std::vector<DecoderLayer> layer_list_;
};
TORCH_MODULE(Transformer);

/// The causal LM: `model.*` plus `lm_head` (absent when tied to the embedding).
class CausalLMImpl : public torch::nn::Module {
 public:
  explicit CausalLMImpl(const model_config& cfg);

  /// Logits (B, T, V). ids, pos: (B, T) int64 with explicit positions; mask: bool (B, T, T)
  /// where true lets query t see key s; undefined = plain causal.
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& pos,
                        const torch::Tensor& mask = {});
  /// Hidden states (B, T, hidden) before the LM head, so callers can project only the
  /// positions they need.
  torch::Tensor hidden(const torch::Tensor& ids, const torch::Tensor& pos,
                       const torch::Tensor& mask = {});
  /// Hidden states (1, T, hidden) of a padding-free row: ids, pos (1, T) hold many sequences
  /// back to back, and `segments` says which keys each token sees.
  torch::Tensor hidden(const torch::Tensor& ids, const torch::Tensor& pos,
                       const segment_plan& segments);
  /// (..., hidden) -> (..., V), in the dtype of `h`.
  torch::Tensor lm_logits(const torch::Tensor& h);

  /// The dtype the forward computes in. Unset (the default): the parameters' dtype. Set to
  /// bf16 on a float32 model: activations, matmuls and the KV cache are bf16 while parameters
  /// and their gradients stay float32 (mixed precision with float32 master weights). The
  /// statistics of RMSNorm and every softmax are float32 either way.
  void set_compute_dtype(std::optional<torch::ScalarType> dtype) { compute_ = dtype; }
  /// The dtype of the activations (and the KV cache) of this model's forward.
  torch::ScalarType compute_dtype() const;

  /// Prefill for generation: returns logits of the last position of each row, (B, V), and
  /// the per-layer keys/values (B, kv_heads, T, head_dim). `last`: (B,) index of each row's
  /// last real token (rows are right-padded).
  torch::Tensor prefill(const torch::Tensor& ids, const torch::Tensor& pos,
                        const torch::Tensor& last, std::vector<torch::Tensor>& k_out,
                        std::vector<torch::Tensor>& v_out);
  /// One decode step for cache rows 0..B-1: ids, pos (B,) int64; writes this token's keys at
  /// `pos` and attends to keys 0..pos of its row. `span` = max(pos) + 1, known to the caller
  /// on the host (saves a device sync). Returns logits (B, V).
  torch::Tensor decode(const torch::Tensor& ids, const torch::Tensor& pos, int64_t span,
                       kv_cache& cache);

  /// rollout.batch_invariant: every forward *without gradients* (generation, the trainer's
  /// log-probs) runs the batch-invariant CPU kernels (batch_invariant.hpp), so a token's logits
  /// do not depend on the batch, the padding, the packing or the decode/prefill path. A forward
  /// with gradients keeps the default kernels: the trainer takes its values from an invariant
  /// forward and its gradients from a default one (policy_trainer).
  bool batch_invariant = false;
  /// Whether this forward runs the batch-invariant kernels (batch_invariant and no gradient).
  bool invariant_now() const;

  /// decode() by the fused kernels (fused_decode.hpp: add + RMSNorm, rotary + cache write,
  /// attention over the cache, silu * up) where they cover the dtype and device, and with one
  /// matmul for q/k/v and one for gate/up once pack_projections() ran: a few operators per
  /// layer instead of some forty. The same function as the composition, up to the order of
  /// float additions (tested). Off: the composition, as before. batch_invariant wins over it.
  bool fused_decode = kFusedDecodeDefault;
  /// Packs each layer's q/k/v and gate/up weights into one tensor apiece (the parameters
  /// become views of it; names, shapes and values stay). Generators call it; a parameter it
  /// packed is copied into by load_snapshot, never re-pointed at a snapshot (is_packed).
  void pack_projections();
  /// Whether pack_projections() made `p` a view of a packed tensor.
  bool is_packed(const torch::Tensor& p) const;

  const model_config& config() const { return cfg_; }
  /// Parameters in a fixed order with their HF names (the order of registration).
  std::vector<std::pair<std::string, torch::Tensor>> ordered_parameters() const;

  Transformer model{nullptr};
  torch::nn::Linear lm_head{nullptr};

 private:
  model_config cfg_;
  std::optional<torch::ScalarType> compute_;
  std::vector<const void*> packed_;  // TensorImpl of each parameter pack_projections() packed
};
TORCH_MODULE(CausalLM);

/// Converts the parameters (not the buffers: the rotary inv_freq stays float32, as HF keeps it)
/// to `dtype`, e.g. bf16 for a bf16 rollouter; the forward then computes in that dtype.
void cast_parameters(CausalLMImpl& model, torch::ScalarType dtype);

/// A fresh model with normal(0, std) weights, zero biases and unit norms, from `seed`.
CausalLM init_causal_lm(const model_config& cfg, double std, uint64_t seed, torch::Device device);

/// A bool (B, T, T) mask from a plain causal triangle, for callers that build their own.
torch::Tensor causal_mask(int64_t T, torch::Device device);

}  // namespace asyncrl

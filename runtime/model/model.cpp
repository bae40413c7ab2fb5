#include "runtime/model/model.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/nn/functional/activation.h>
#include <torch/nn/functional/linear.h>

#include "runtime/model/fused_decode.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace asyncrl {

using torch::indexing::Slice;

kv_cache::kv_cache(const model_config& cfg, int64_t slots_, int64_t max_len_, torch::Device device,
                   torch::ScalarType dtype)
    : slots(slots_), max_len(max_len_) {
  auto opts = torch::TensorOptions().dtype(dtype).device(device);
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    k.push_back(torch::zeros({slots, cfg.num_key_value_heads, max_len, cfg.head_dim}, opts));
    v.push_back(torch::zeros({slots, cfg.num_key_value_heads, max_len, cfg.head_dim}, opts));
  }
}

void kv_cache::move_row(int64_t from, int64_t to) {
  if (from == to) return;
  for (size_t l = 0; l < k.size(); ++l) {
    k[l][to].copy_(k[l][from]);
    v[l][to].copy_(v[l][from]);
  }
}

void kv_cache::write_prefix(int64_t row, const std::vector<torch::Tensor>& src_k,
                            const std::vector<torch::Tensor>& src_v, int64_t src, int64_t len) {
  for (size_t l = 0; l < k.size(); ++l) {
    k[l][row].narrow(1, 0, len).copy_(src_k[l][src].narrow(1, 0, len));
    v[l][row].narrow(1, 0, len).copy_(src_v[l][src].narrow(1, 0, len));
  }
}

RMSNormImpl::RMSNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight = register_parameter("weight", torch::ones({dim}));
}

torch::Tensor RMSNormImpl::forward(const torch::Tensor& x) {
  // At least float32 (HF upcasts half precision here); float64 models stay float64.
  auto xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat32);
  auto var = xf.pow(2).mean(-1, /*keepdim=*/true);
  return as_compute(weight, x) * (xf * torch::rsqrt(var + eps_)).to(x.scalar_type());
}

torch::Tensor RMSNormImpl::forward_invariant(const torch::Tensor& x) {
  return bi_rms_norm(x, as_compute(weight, x), eps_);
}

AttentionImpl::AttentionImpl(const model_config& cfg)
    : heads_(cfg.num_attention_heads), kv_heads_(cfg.num_key_value_heads), head_dim_(cfg.head_dim) {
  auto lin = [&](int64_t in, int64_t out, bool bias) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
  };
  q_proj = register_module("q_proj", lin(cfg.hidden_size, heads_ * head_dim_, cfg.attention_bias));
  k_proj =
      register_module("k_proj", lin(cfg.hidden_size, kv_heads_ * head_dim_, cfg.attention_bias));
  v_proj =
      register_module("v_proj", lin(cfg.hidden_size, kv_heads_ * head_dim_, cfg.attention_bias));
  o_proj = register_module("o_proj", lin(heads_ * head_dim_, cfg.hidden_size, false));
}

namespace {

// "Rotate half" RoPE convention of HF Llama/Qwen2: (x1, x2) -> (-x2, x1) on the two halves.
torch::Tensor rotate_half(const torch::Tensor& x) {
  auto half = x.size(-1) / 2;
  return torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
}

torch::Tensor apply_rope(const torch::Tensor& x, const torch::Tensor& cos,
                         const torch::Tensor& sin) {
  return x * cos + rotate_half(x) * sin;
}

// x @ W^T + b with W and b in x's dtype (as_compute).
torch::Tensor linear(const torch::nn::Linear& l, const torch::Tensor& x) {
  const auto& b = l->bias;
  return torch::nn::functional::linear(x, as_compute(l->weight, x),
                                       b.defined() ? as_compute(b, x) : b);
}

// The same by the batch-invariant kernel when `invariant`.
torch::Tensor linear(const torch::nn::Linear& l, const torch::Tensor& x, bool invariant) {
  if (!invariant) return linear(l, x);
  const auto& b = l->bias;
  return bi_linear(x, as_compute(l->weight, x), b.defined() ? as_compute(b, x) : b);
}

// Concatenates `parts` along dim 0 into one new tensor and points each at its rows there.
torch::Tensor pack_rows(const std::vector<torch::Tensor>& parts) {
  torch::NoGradGuard no_grad;
  auto packed = torch::cat(parts, 0).contiguous();
  int64_t row = 0;
  for (auto p : parts) {  // a handle: set_data changes the parameter itself
    p.set_data(packed.narrow(0, row, p.size(0)));
    row += p.size(0);
  }
  return packed;
}

// Whether `parts` are still the consecutive rows of `packed` (a load or cast that re-pointed
// a parameter, or moved the model, breaks it).
bool rows_of(const torch::Tensor& packed, const std::vector<torch::Tensor>& parts) {
  if (!packed.defined()) return false;
  const auto* at = static_cast<const char*>(packed.data_ptr());
  for (const auto& p : parts) {
    if (p.scalar_type() != packed.scalar_type() || p.device() != packed.device() ||
        p.data_ptr() != at || !p.is_contiguous())
      return false;
    at += p.numel() * p.element_size();
  }
  return at == static_cast<const char*>(packed.data_ptr()) + packed.numel() * packed.element_size();
}

}  // namespace

void AttentionImpl::pack() {
  qkv_weight_ = pack_rows({q_proj->weight, k_proj->weight, v_proj->weight});
  if (q_proj->bias.defined()) qkv_bias_ = pack_rows({q_proj->bias, k_proj->bias, v_proj->bias});
}

bool AttentionImpl::packed() const {
  return rows_of(qkv_weight_, {q_proj->weight, k_proj->weight, v_proj->weight}) &&
         (!q_proj->bias.defined() ||
          rows_of(qkv_bias_, {q_proj->bias, k_proj->bias, v_proj->bias}));
}

torch::Tensor AttentionImpl::qkv(const torch::Tensor& x) const {
  if (packed())
    return torch::nn::functional::linear(
        x, as_compute(qkv_weight_, x), qkv_bias_.defined() ? as_compute(qkv_bias_, x) : qkv_bias_);
  return torch::cat({linear(q_proj, x), linear(k_proj, x), linear(v_proj, x)}, -1);
}

torch::Tensor AttentionImpl::decode_fused(const torch::Tensor& x, const attention_inputs& in) {
  const auto q_cols = heads_ * head_dim_, kv_cols = kv_heads_ * head_dim_;
  auto all = qkv(x);  // (B, q_cols + 2 kv_cols)
  auto q = fused::rope_write_cache(all.narrow(1, 0, q_cols), all.narrow(1, q_cols, kv_cols),
                                   all.narrow(1, q_cols + kv_cols, kv_cols), in.cos, in.sin,
                                   in.cache_pos, in.cache->k[in.layer], in.cache->v[in.layer]);
  return linear(o_proj, fused::decode_attention(q, in.cache->k[in.layer], in.cache->v[in.layer],
                                                in.cache_pos));
}

torch::Tensor AttentionImpl::forward(const torch::Tensor& x, const attention_inputs& in) {
  const auto B = x.size(0), T = x.size(1), G = heads_ / kv_heads_;
  // (B, T, H*D) -> (B, H, T, D)
  const bool inv = in.invariant;
  torch::Tensor q, k, v;
  if (!inv && !torch::GradMode::is_enabled() && packed()) {
    // One matmul for the three (prefill and the unfused decode of a generator's model).
    auto all = qkv(x);
    const auto q_cols = heads_ * head_dim_, kv_cols = kv_heads_ * head_dim_;
    q = all.narrow(-1, 0, q_cols).view({B, T, heads_, head_dim_}).transpose(1, 2);
    k = all.narrow(-1, q_cols, kv_cols).view({B, T, kv_heads_, head_dim_}).transpose(1, 2);
    v = all.narrow(-1, q_cols + kv_cols, kv_cols)
            .view({B, T, kv_heads_, head_dim_})
            .transpose(1, 2);
  } else {
    q = linear(q_proj, x, inv).view({B, T, heads_, head_dim_}).transpose(1, 2);
    k = linear(k_proj, x, inv).view({B, T, kv_heads_, head_dim_}).transpose(1, 2);
    v = linear(v_proj, x, inv).view({B, T, kv_heads_, head_dim_}).transpose(1, 2);
  }
  // Elementwise products and sums only: exact operations, the same bits on every path.
  q = apply_rope(q, in.cos, in.sin);
  k = apply_rope(k, in.cos, in.sin);
  if (in.segments != nullptr && !inv)
    return linear(o_proj, segment_attention(q, k, v, *in.segments));

  torch::Tensor keys, values, mask;
  if (in.cache != nullptr) {
    // Decode: write this step's key/value at each row's position, then read the row's prefix.
    auto rows = torch::arange(B, torch::TensorOptions().dtype(torch::kLong).device(x.device()));
    auto& kc = in.cache->k[in.layer];
    auto& vc = in.cache->v[in.layer];
    kc.index_put_({rows, Slice(), in.cache_pos}, k.squeeze(2));  // (B, KVH, D)
    vc.index_put_({rows, Slice(), in.cache_pos}, v.squeeze(2));
    keys = kc.narrow(0, 0, B).narrow(2, 0, in.cache_span);  // (B, KVH, S, D)
    values = vc.narrow(0, 0, B).narrow(2, 0, in.cache_span);
    mask = in.mask;  // (B, 1, 1, 1, S)
  } else {
    keys = k;
    values = v;
    mask = in.mask;
    if (in.k_out != nullptr) {
      in.k_out->push_back(k.detach());
      in.v_out->push_back(v.detach());
    }
  }
  if (inv) return linear(o_proj, bi_attention(q, keys, values, in.keys), true);
  const auto S = keys.size(2);
  // GQA without repeating keys: query heads h = kv * G + g share kv head `kv`.
  // (B, KVH, G*T, D) @ (B, KVH, D, S) -> (B, KVH, G*T, S)
  auto qg = q.reshape({B, kv_heads_, G * T, head_dim_});
  // Scores, mask and softmax in at least float32 (HF's eager attention upcasts bf16 there too).
  auto scores =
      at_least_float(torch::matmul(qg, keys.transpose(-1, -2))) / std::sqrt(double(head_dim_));
  scores = scores.view({B, kv_heads_, G, T, S});
  // The lowest float rather than -inf: masked keys still get exactly zero weight, and a query
  // that may see no key at all (padding) gets a uniform row instead of NaN.
  const float lowest = std::numeric_limits<float>::lowest();
  if (mask.defined()) {
    scores = scores.masked_fill(mask.logical_not(), lowest);
  } else {
    auto causal = torch::ones({T, S}, torch::TensorOptions().dtype(torch::kBool).device(x.device()))
                      .tril(S - T);
    scores = scores.masked_fill(causal.logical_not(), lowest);
  }
  auto probs = torch::softmax(scores, -1).to(values.scalar_type()).view({B, kv_heads_, G * T, S});
  auto out = torch::matmul(probs, values)          // (B, KVH, G*T, D)
                 .view({B, heads_, T, head_dim_})  // (B, H, T, D)
                 .transpose(1, 2)
                 .reshape({B, T, heads_ * head_dim_});
  return linear(o_proj, out);
}

MLPImpl::MLPImpl(const model_config& cfg) {
  auto lin = [](int64_t in, int64_t out) {
    return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
  };
  gate_proj = register_module("gate_proj", lin(cfg.hidden_size, cfg.intermediate_size));
  up_proj = register_module("up_proj", lin(cfg.hidden_size, cfg.intermediate_size));
  down_proj = register_module("down_proj", lin(cfg.intermediate_size, cfg.hidden_size));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  return linear(down_proj, torch::silu(linear(gate_proj, x)) * linear(up_proj, x));
}

torch::Tensor MLPImpl::forward_invariant(const torch::Tensor& x) {
  return linear(down_proj, bi_silu_mul(linear(gate_proj, x, true), linear(up_proj, x, true)), true);
}

void MLPImpl::pack() {
  gate_up_weight_ = pack_rows({gate_proj->weight, up_proj->weight});
}

bool MLPImpl::packed() const {
  return rows_of(gate_up_weight_, {gate_proj->weight, up_proj->weight});
}

torch::Tensor MLPImpl::decode_fused(const torch::Tensor& x) {
  if (!packed())
    return linear(down_proj, fused::silu_mul(linear(gate_proj, x), linear(up_proj, x)));
  const auto I = gate_proj->weight.size(0);
  auto gu = torch::nn::functional::linear(x, as_compute(gate_up_weight_, x));  // (B, 2 I)
  return linear(down_proj, fused::silu_mul(gu.narrow(1, 0, I), gu.narrow(1, I, I)));
}

DecoderLayerImpl::DecoderLayerImpl(const model_config& cfg) {
  self_attn = register_module("self_attn", Attention(cfg));
  mlp = register_module("mlp", MLP(cfg));
  input_layernorm = register_module("input_layernorm", RMSNorm(cfg.hidden_size, cfg.rms_norm_eps));
  post_attention_layernorm =
      register_module("post_attention_layernorm", RMSNorm(cfg.hidden_size, cfg.rms_norm_eps));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const attention_inputs& in) {
  if (in.invariant) {
    auto h = x + self_attn(input_layernorm->forward_invariant(x), in);
    return h + mlp->forward_invariant(post_attention_layernorm->forward_invariant(h));
  }
  auto h = x + self_attn(input_layernorm(x), in);
  return h + mlp(post_attention_layernorm(h));
}

namespace {

// One decoder layer whose forward keeps only its input: the backward runs the layer again with
// gradients and back-propagates through that (a reentrant backward, as PyTorch's checkpoint).
// The attention inputs travel as tensors and addresses: the rotary tables and mask are saved,
// the segment plan is the caller's (packed_batch outlives the backward).
struct checkpointed_layer : torch::autograd::Function<checkpointed_layer> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor x,
                               int64_t layer, int64_t inputs) {
    const auto& in = *reinterpret_cast<const attention_inputs*>(inputs);
    ctx->save_for_backward({x});
    ctx->saved_data["layer"] = layer;
    ctx->saved_data["cos"] = in.cos;
    ctx->saved_data["sin"] = in.sin;
    ctx->saved_data["mask"] = in.mask;
    ctx->saved_data["segments"] = reinterpret_cast<int64_t>(in.segments);
    return reinterpret_cast<DecoderLayerImpl*>(layer)->forward(x, in);  // (B, T, hidden)
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    attention_inputs in;
    in.cos = ctx->saved_data["cos"].toTensor();
    in.sin = ctx->saved_data["sin"].toTensor();
    if (ctx->saved_data["mask"].isTensor()) in.mask = ctx->saved_data["mask"].toTensor();
    in.segments = reinterpret_cast<const segment_plan*>(ctx->saved_data["segments"].toInt());
    auto* layer = reinterpret_cast<DecoderLayerImpl*>(ctx->saved_data["layer"].toInt());
    torch::Tensor y;
    {
      torch::AutoGradMode with_grad(true);
      y = layer->forward(x, in);
    }
    // Accumulates into the layer's parameters' .grad, as the one-pass backward does.
    torch::autograd::backward({y}, {grad[0]});
    return {x.grad(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

TransformerImpl::TransformerImpl(const model_config& cfg) {
  embed_tokens =
      register_module("embed_tokens", torch::nn::Embedding(cfg.vocab_size, cfg.hidden_size));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
    layer_list_.push_back(DecoderLayer(cfg));
    layers->push_back(layer_list_.back());
  }
  norm = register_module("norm", RMSNorm(cfg.hidden_size, cfg.rms_norm_eps));
  // inv_freq[i] = theta^(-2i / D), in float32 as in HF.
  auto idx = torch::arange(0, cfg.head_dim, 2, torch::kInt64).to(torch::kFloat32);
  // Registered so that ->to(device) moves it; libtorch's to() updates it in place.
  inv_freq_ =
      register_buffer("inv_freq", 1.0 / torch::pow(cfg.rope_theta, idx / double(cfg.head_dim)));
}

torch::Tensor TransformerImpl::forward(const torch::Tensor& ids, const torch::Tensor& pos,
                                       attention_inputs& in,
                                       std::optional<torch::ScalarType> compute) {
  // Gathering rows of the float32 table and casting them equals gathering from a cast table,
  // and the gradient still reaches the float32 rows.
  auto h = embed_tokens(ids);
  if (compute && h.scalar_type() != *compute) h = h.to(*compute);
  // (B, T, D/2) angles -> (B, 1, T, D) tables, duplicated halves as in HF: computed in
  // inv_freq's float32 (float64 for a float64 trainer), then cast to the activations' dtype as
  // HF does for bf16.
  auto freqs = pos.to(inv_freq_.scalar_type()).unsqueeze(-1) * inv_freq_;
  auto emb = torch::cat({freqs, freqs}, -1).unsqueeze(1);
  if (in.invariant) {
    // ATen's vectorised cos and its scalar tail may differ in the last bit: one scalar call
    // for every angle. And the keys of each query, in the order every path visits them.
    auto cs = bi_cos_sin(emb);
    in.cos = cs.first.to(h.scalar_type());
    in.sin = cs.second.to(h.scalar_type());
    const auto B = ids.size(0), T = ids.size(1);
    if (in.cache != nullptr)
      in.keys = keys_from_mask(in.mask.reshape({B, 1, in.cache_span}));
    else if (in.segments != nullptr)
      in.keys = keys_from_segments(*in.segments);
    else if (in.mask.defined())
      in.keys = keys_from_mask(in.mask.reshape({B, T, T}));
    else
      in.keys = keys_causal(B, T, T);
  } else {
    in.cos = emb.cos().to(h.scalar_type());
    in.sin = emb.sin().to(h.scalar_type());
  }
  if (in.fused) return decode_fused(h, in);
  const bool checkpoint = checkpoint_layers && torch::GradMode::is_enabled() &&
                          in.cache == nullptr && in.k_out == nullptr;
  for (size_t l = 0; l < layer_list_.size(); ++l) {
    in.layer = static_cast<int64_t>(l);
    if (checkpoint)
      h = checkpointed_layer::apply(h, reinterpret_cast<int64_t>(layer_list_[l].get()),
                                    reinterpret_cast<int64_t>(&in));
    else
      h = layer_list_[l]->forward(h, in);
  }
  return in.invariant ? norm->forward_invariant(h) : norm(h);
}

torch::Tensor TransformerImpl::decode_fused(const torch::Tensor& h, attention_inputs& in) {
  // The residual stream r and its normed copy n, (B, hidden): each layer's two residual adds
  // run with the RMSNorm that follows them (the next layer's input norm, or the final norm).
  const auto B = h.size(0), C = h.size(2);
  auto [r, n] =
      fused::add_rms_norm(h.view({B, C}), {}, layer_list_.front()->input_layernorm->weight,
                          layer_list_.front()->input_layernorm->eps());
  for (size_t l = 0; l < layer_list_.size(); ++l) {
    in.layer = static_cast<int64_t>(l);
    auto& layer = *layer_list_[l];
    auto a = layer.self_attn->decode_fused(n, in);
    std::tie(r, n) = fused::add_rms_norm(r, a, layer.post_attention_layernorm->weight,
                                         layer.post_attention_layernorm->eps());
    auto m = layer.mlp->decode_fused(n);
    const auto& next = l + 1 < layer_list_.size() ? layer_list_[l + 1]->input_layernorm : norm;
    std::tie(r, n) = fused::add_rms_norm(r, m, next->weight, next->eps());
  }
  return n.view({B, 1, C});
}

CausalLMImpl::CausalLMImpl(const model_config& cfg) : cfg_(cfg) {
  cfg_.validate("model config");
  model = register_module("model", Transformer(cfg));
  if (!cfg.tie_word_embeddings)
    lm_head = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(cfg.hidden_size, cfg.vocab_size).bias(false)));
}

namespace {

attention_inputs full_inputs(const torch::Tensor& mask) {
  attention_inputs in;
  if (mask.defined()) {
    TORCH_CHECK(mask.dim() == 3 && mask.scalar_type() == torch::kBool,
                "attention mask must be bool (B, T, T), got ", mask.sizes());
    in.mask = mask.unsqueeze(1).unsqueeze(1);  // (B, 1, 1, T, T)
  }
  return in;
}

void check_ids(const torch::Tensor& ids, const torch::Tensor& pos, const model_config& cfg) {
  TORCH_CHECK(ids.dim() == 2 && pos.sizes() == ids.sizes(),
              "ids and position ids must both be (B, T); got ", ids.sizes(), " and ", pos.sizes());
  TORCH_CHECK(ids.scalar_type() == torch::kLong && pos.scalar_type() == torch::kLong,
              "ids and position ids must be int64");
  (void)cfg;
}

}  // namespace

torch::Tensor CausalLMImpl::hidden(const torch::Tensor& ids, const torch::Tensor& pos,
                                   const torch::Tensor& mask) {
  check_ids(ids, pos, cfg_);
  auto in = full_inputs(mask);
  in.invariant = invariant_now();
  return model->forward(ids, pos, in, compute_);
}

torch::Tensor CausalLMImpl::hidden(const torch::Tensor& ids, const torch::Tensor& pos,
                                   const segment_plan& segments) {
  check_ids(ids, pos, cfg_);
  TORCH_CHECK(ids.size(0) == 1, "a padding-free forward takes one row, got ", ids.sizes());
  attention_inputs in;
  in.segments = &segments;
  in.invariant = invariant_now();
  return model->forward(ids, pos, in, compute_);
}

torch::Tensor CausalLMImpl::lm_logits(const torch::Tensor& h) {
  const bool inv = invariant_now();
  if (lm_head) return linear(lm_head, h, inv);
  if (inv) return bi_linear(h, as_compute(model->embed_tokens->weight, h));
  return torch::matmul(h, as_compute(model->embed_tokens->weight, h).t());
}

bool CausalLMImpl::invariant_now() const {
  return batch_invariant && !torch::GradMode::is_enabled();
}

torch::ScalarType CausalLMImpl::compute_dtype() const {
  if (compute_) return *compute_;
  return model->embed_tokens->weight.scalar_type();
}

torch::Tensor CausalLMImpl::forward(const torch::Tensor& ids, const torch::Tensor& pos,
                                    const torch::Tensor& mask) {
  return lm_logits(hidden(ids, pos, mask));
}

torch::Tensor CausalLMImpl::prefill(const torch::Tensor& ids, const torch::Tensor& pos,
                                    const torch::Tensor& last, std::vector<torch::Tensor>& k_out,
                                    std::vector<torch::Tensor>& v_out) {
  check_ids(ids, pos, cfg_);
  attention_inputs in;
  k_out.clear();
  v_out.clear();
  in.k_out = &k_out;
  in.v_out = &v_out;
  in.invariant = invariant_now();
  auto h = model->forward(ids, pos, in, compute_);  // (B, T, hidden)
  auto rows = torch::arange(ids.size(0), last.options());
  return lm_logits(h.index({rows, last}));  // (B, V)
}

torch::Tensor CausalLMImpl::decode(const torch::Tensor& ids, const torch::Tensor& pos, int64_t span,
                                   kv_cache& cache) {
  const auto B = ids.size(0);
  TORCH_CHECK(B <= cache.slots, "decode batch ", B, " exceeds cache slots ", cache.slots);
  attention_inputs in;
  in.cache = &cache;
  in.cache_pos = pos;
  in.cache_span = span;
  TORCH_CHECK(in.cache_span <= cache.max_len, "position ", in.cache_span - 1,
              " is beyond the KV cache length ", cache.max_len);
  in.invariant = invariant_now();
  // The fused kernels need the cache in the activations' dtype, as kv_cache makes it.
  in.fused = fused_decode && !in.invariant && !torch::GradMode::is_enabled() &&
             cache.k.front().scalar_type() == compute_dtype() &&
             fused::supported(cache.k.front(), cfg_.head_dim);
  if (!in.fused) {
    // Row b sees keys 0..pos[b]; the rest of the span belongs to longer rows.
    auto keys = torch::arange(in.cache_span, pos.options());
    in.mask = (keys.unsqueeze(0) <= pos.unsqueeze(1)).view({B, 1, 1, 1, in.cache_span});
  }
  auto h = model->forward(ids.unsqueeze(1), pos.unsqueeze(1), in, compute_);  // (B, 1, hidden)
  return lm_logits(h.squeeze(1));
}

void CausalLMImpl::pack_projections() {
  bool all_packed = !packed_.empty();
  for (auto& layer : model->layers->children()) {
    auto* d = layer->as<DecoderLayerImpl>();
    all_packed = all_packed && d->self_attn->packed() && d->mlp->packed();
  }
  if (all_packed) return;  // keep the addresses that captured CUDA graphs read
  packed_.clear();
  for (auto& layer : model->layers->children()) {
    auto* d = layer->as<DecoderLayerImpl>();
    d->self_attn->pack();
    d->mlp->pack();
    for (const auto* l : {&d->self_attn->q_proj, &d->self_attn->k_proj, &d->self_attn->v_proj}) {
      packed_.push_back((*l)->weight.unsafeGetTensorImpl());
      if ((*l)->bias.defined()) packed_.push_back((*l)->bias.unsafeGetTensorImpl());
    }
    packed_.push_back(d->mlp->gate_proj->weight.unsafeGetTensorImpl());
    packed_.push_back(d->mlp->up_proj->weight.unsafeGetTensorImpl());
  }
  std::sort(packed_.begin(), packed_.end());
}

bool CausalLMImpl::is_packed(const torch::Tensor& p) const {
  return std::binary_search(packed_.begin(), packed_.end(),
                            static_cast<const void*>(p.unsafeGetTensorImpl()));
}

std::vector<std::pair<std::string, torch::Tensor>> CausalLMImpl::ordered_parameters() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (auto& item : named_parameters(/*recurse=*/true))
    out.emplace_back(item.key(), item.value());
  return out;
}

void cast_parameters(CausalLMImpl& model, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  for (auto& p : model.parameters())
    if (p.scalar_type() != dtype) p.set_data(p.to(dtype));
}

CausalLM init_causal_lm(const model_config& cfg, double std, uint64_t seed, torch::Device device) {
  CausalLM m(cfg);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : m->ordered_parameters()) {
    bool is_norm = name.find("norm") != std::string::npos;
    bool is_bias = name.size() > 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_norm)
      p.fill_(1.0);
    else if (is_bias)
      p.zero_();
    else
      p.normal_(0.0, std, gen);
  }
  m->to(device);
  return m;
}

torch::Tensor causal_mask(int64_t T, torch::Device device) {
  return torch::ones({T, T}, torch::TensorOptions().dtype(torch::kBool).device(device)).tril();
}

}  // namespace asyncrl

#pragma once

// An independent, deliberately plain reference of the Qwen2/Llama forward pass: one
// sequence, no cache, no torch, double precision, loops only. It reads weights straight from
// a safetensors file, so it shares no code with runtime/model.cpp.

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "runtime/model/model_config.hpp"
#include "runtime/model/safetensors.hpp"

namespace asyncrl::test {

struct ref_model {
  model_config cfg;
  std::map<std::string, std::vector<double>> w;

  ref_model(const model_config& c, const safetensors_file& f) : cfg(c) {
    for (auto& t : f.tensors()) {
      auto v = f.to_f32(t);
      w[t.name] = std::vector<double>(v.begin(), v.end());
    }
  }

  const std::vector<double>& get(const std::string& name) const { return w.at(name); }

  // y[out] = W[out][in] x[in] (+ b)
  std::vector<double> linear(const std::string& name, const std::vector<double>& x, int64_t out,
                             bool bias) const {
    const auto& W = get(name + ".weight");
    int64_t in = static_cast<int64_t>(x.size());
    std::vector<double> y(out, 0.0);
    for (int64_t o = 0; o < out; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < in; ++i)
        acc += W[o * in + i] * x[i];
      y[o] = acc + (bias ? get(name + ".bias")[o] : 0.0);
    }
    return y;
  }

  std::vector<double> rmsnorm(const std::string& name, const std::vector<double>& x) const {
    double ss = 0;
    for (double v : x)
      ss += v * v;
    double r = 1.0 / std::sqrt(ss / x.size() + cfg.rms_norm_eps);
    const auto& g = get(name + ".weight");
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      y[i] = x[i] * r * g[i];
    return y;
  }

  // Rotate-half RoPE on one head vector of size D at position p.
  void rope(double* v, int64_t p) const {
    int64_t D = cfg.head_dim, half = D / 2;
    for (int64_t i = 0; i < half; ++i) {
      double inv = std::pow(cfg.rope_theta, -2.0 * i / D);
      double c = std::cos(p * inv), s = std::sin(p * inv);
      double a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }

  /// Logits (T x V, row-major) for one sequence; allowed[t][u] says whether query t may
  /// attend to key u (empty = causal).
  std::vector<double> logits(const std::vector<int64_t>& ids, const std::vector<int64_t>& pos,
                             const std::vector<std::vector<bool>>& allowed = {}) const {
    const int64_t T = static_cast<int64_t>(ids.size()), Hd = cfg.hidden_size, D = cfg.head_dim;
    const int64_t H = cfg.num_attention_heads, KV = cfg.num_key_value_heads, G = H / KV;
    const bool bias = cfg.attention_bias;
    const auto& emb = get("model.embed_tokens.weight");
    std::vector<std::vector<double>> x(T, std::vector<double>(Hd));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < Hd; ++i)
        x[t][i] = emb[ids[t] * Hd + i];
    for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) {
      auto pre = "model.layers." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(T), k(T), v(T);
      for (int64_t t = 0; t < T; ++t) {
        auto h = rmsnorm(pre + "input_layernorm", x[t]);
        q[t] = linear(pre + "self_attn.q_proj", h, H * D, bias);
        k[t] = linear(pre + "self_attn.k_proj", h, KV * D, bias);
        v[t] = linear(pre + "self_attn.v_proj", h, KV * D, bias);
        for (int64_t hh = 0; hh < H; ++hh)
          rope(&q[t][hh * D], pos[t]);
        for (int64_t hh = 0; hh < KV; ++hh)
          rope(&k[t][hh * D], pos[t]);
      }
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> attn(H * D, 0.0);
        for (int64_t hh = 0; hh < H; ++hh) {
          int64_t kvh = hh / G;
          std::vector<double> s(T, -INFINITY);
          double mx = -INFINITY;
          for (int64_t u = 0; u < T; ++u) {
            bool ok = allowed.empty() ? (u <= t) : allowed[t][u];
            if (!ok) continue;
            double acc = 0;
            for (int64_t d = 0; d < D; ++d)
              acc += q[t][hh * D + d] * k[u][kvh * D + d];
            s[u] = acc / std::sqrt(double(D));
            mx = std::max(mx, s[u]);
          }
          double z = 0;
          for (int64_t u = 0; u < T; ++u)
            z += std::isinf(s[u]) ? 0.0 : std::exp(s[u] - mx);
          for (int64_t u = 0; u < T; ++u) {
            if (std::isinf(s[u])) continue;
            double p = std::exp(s[u] - mx) / z;
            for (int64_t d = 0; d < D; ++d)
              attn[hh * D + d] += p * v[u][kvh * D + d];
          }
        }
        auto o = linear(pre + "self_attn.o_proj", attn, Hd, false);
        for (int64_t i = 0; i < Hd; ++i)
          x[t][i] += o[i];
        auto h2 = rmsnorm(pre + "post_attention_layernorm", x[t]);
        auto g = linear(pre + "mlp.gate_proj", h2, cfg.intermediate_size, false);
        auto up = linear(pre + "mlp.up_proj", h2, cfg.intermediate_size, false);
        for (int64_t i = 0; i < cfg.intermediate_size; ++i)
          g[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
        auto dn = linear(pre + "mlp.down_proj", g, Hd, false);
        for (int64_t i = 0; i < Hd; ++i)
          x[t][i] += dn[i];
      }
    }
    const auto& head =
        cfg.tie_word_embeddings ? get("model.embed_tokens.weight") : get("lm_head.weight");
    std::vector<double> out(T * cfg.vocab_size);
    for (int64_t t = 0; t < T; ++t) {
      auto h = rmsnorm("model.norm", x[t]);
      for (int64_t o = 0; o < cfg.vocab_size; ++o) {
        double acc = 0;
        for (int64_t i = 0; i < Hd; ++i)
          acc += head[o * Hd + i] * h[i];
        out[t * cfg.vocab_size + o] = acc;
      }
    }
    return out;
  }
};

}  // namespace asyncrl::test

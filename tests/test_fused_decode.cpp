// The fused decode kernels (runtime/model/fused_decode.hpp) against the ATen compositions they
// replace, on the CPU; the fused decode step against the composed one; packed projections; and
// the operators a decode step dispatches. The CUDA kernels compute the same and are checked
// against these compositions only on a GPU (bench/gpu_session.sh), not here.

#include <ATen/record_function.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "runtime/model/fused_decode.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "tests/tiny_model.hpp"

using namespace asyncrl;

namespace {

torch::Tensor randn(torch::IntArrayRef s, torch::ScalarType t, uint64_t seed) {
  torch::manual_seed(seed);
  return torch::randn(s, torch::kDouble).to(t);
}

double max_abs(const torch::Tensor& a, const torch::Tensor& b) {
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>();
}

// The compositions of model.cpp, written out.
torch::Tensor rms_norm_ref(const torch::Tensor& x, const torch::Tensor& w, double eps) {
  auto xf = x.scalar_type() == torch::kDouble ? x : x.to(torch::kFloat);
  auto n = (xf * torch::rsqrt(xf.pow(2).mean(-1, true) + eps)).to(x.scalar_type());
  return w.to(x.scalar_type()) * n;
}
torch::Tensor rope_ref(const torch::Tensor& x, const torch::Tensor& c, const torch::Tensor& s) {
  auto half = x.size(-1) / 2;
  auto rot = torch::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * c + rot * s;
}

struct tol {
  torch::ScalarType t;
  double eps;
};
// float64: rounding only; float32: a few ulps of sums of ~64 terms; bf16: one bf16 ulp (2^-8
// relative) of values of magnitude ~4 where the kernel and ATen sum in another order.
const tol kTolerances[] = {
    {torch::kDouble, 1e-12}, {torch::kFloat, 2e-5}, {torch::kBFloat16, 3e-2}};

TEST(FusedDecode, AddRmsNormMatchesAddThenRmsNorm) {
  for (const auto& [t, eps] : kTolerances) {
    auto r = randn({5, 48}, t, 1), x = randn({5, 48}, t, 2);
    auto w = randn({48}, torch::kFloat, 3);  // float32 master weight, cast as as_compute does
    auto [sum, norm] = fused::add_rms_norm(r, x, w, 1e-5);
    auto want_sum = r + x;
    EXPECT_EQ(max_abs(sum, want_sum), 0.0) << t;  // one rounded add: exact
    EXPECT_LE(max_abs(norm, rms_norm_ref(want_sum, w, 1e-5)), eps) << t;
    // Without the add: the residual itself is normed (the first layer's input norm).
    auto [same, n0] = fused::add_rms_norm(r, {}, w, 1e-5);
    EXPECT_TRUE(same.is_same(r));
    EXPECT_LE(max_abs(n0, rms_norm_ref(r, w, 1e-5)), eps) << t;
  }
  // eps enters under the root: a large eps shrinks every value (catches eps added outside).
  auto r = randn({2, 16}, torch::kDouble, 4);
  auto w = torch::ones({16}, torch::kDouble);
  EXPECT_LE(max_abs(fused::add_rms_norm(r, {}, w, 3.0).second, rms_norm_ref(r, w, 3.0)), 1e-12);
}

TEST(FusedDecode, RopeAndCacheWriteMatchComposition) {
  const int64_t B = 3, H = 4, KVH = 2, D = 8, L = 6;
  for (const auto& [t, eps] : kTolerances) {
    // q, k, v as column slices of one fused projection output (row stride > width).
    auto all = randn({B, (H + 2 * KVH) * D}, t, 5);
    auto q = all.narrow(1, 0, H * D), k = all.narrow(1, H * D, KVH * D);
    auto v = all.narrow(1, (H + KVH) * D, KVH * D);
    auto angles = randn({B, 1, 1, D}, torch::kFloat, 6);
    auto c = angles.cos().to(t), s = angles.sin().to(t);
    auto pos = torch::tensor({4, 0, 5}, torch::kLong);
    auto kc = torch::full({B + 1, KVH, L, D}, 7.0, t), vc = torch::full({B + 1, KVH, L, D}, 7.0, t);
    auto qr = fused::rope_write_cache(q, k, v, c, s, pos, kc, vc);

    auto q4 = q.reshape({B, H, D}), k4 = k.reshape({B, KVH, D});
    auto c3 = c.reshape({B, 1, D}), s3 = s.reshape({B, 1, D});
    // Elementwise products and sums with the same roundings: bit-equal in every dtype.
    EXPECT_EQ(max_abs(qr, rope_ref(q4, c3, s3)), 0.0) << t;
    auto want_k = rope_ref(k4, c3, s3);
    for (int64_t b = 0; b < B; ++b) {
      const auto p = pos[b].item<int64_t>();
      EXPECT_EQ(max_abs(kc[b].select(1, p), want_k[b]), 0.0) << t << " row " << b;
      EXPECT_EQ(max_abs(vc[b].select(1, p), v[b].reshape({KVH, D})), 0.0) << t;
      // Every other position, and the unused slot, untouched (an off-by-one writes there).
      auto others = kc[b].sum(-1).ne(7.0 * D).to(torch::kLong).sum().item<int64_t>();
      EXPECT_EQ(others, KVH) << t << " row " << b;
    }
    EXPECT_EQ(kc[B].ne(7.0).sum().item<int64_t>(), 0);
  }
}

TEST(FusedDecode, AttentionReadsKeysUpToEachRowsPosition) {
  const int64_t B = 3, H = 6, KVH = 2, D = 16, L = 9, G = H / KVH;
  for (const auto& [t, eps] : kTolerances) {
    auto q = randn({B, H, D}, t, 7);
    auto kc = randn({B, KVH, L, D}, t, 8), vc = randn({B, KVH, L, D}, t, 9);
    auto pos = torch::tensor({0, 5, 8}, torch::kLong);
    auto got = fused::decode_attention(q, kc, vc, pos).view({B, H, D});
    for (int64_t b = 0; b < B; ++b) {
      const auto n = pos[b].item<int64_t>() + 1;
      for (int64_t h = 0; h < H; ++h) {
        auto keys = kc[b][h / G].narrow(0, 0, n), values = vc[b][h / G].narrow(0, 0, n);
        auto scores = torch::matmul(keys, q[b][h]);  // (n,), in the dtype
        auto f = scores.scalar_type() == torch::kDouble ? scores : scores.to(torch::kFloat);
        auto probs = torch::softmax(f / std::sqrt(double(D)), -1).to(t);
        auto want = torch::matmul(probs, values);
        EXPECT_LE(max_abs(got[b][h], want), eps) << t << " row " << b << " head " << h;
      }
    }
  }
  // A key past the row's position must not count: changing it leaves the output as it was.
  auto q = randn({1, 2, 8}, torch::kDouble, 10);
  auto kc = randn({1, 1, 4, 8}, torch::kDouble, 11), vc = randn({1, 1, 4, 8}, torch::kDouble, 12);
  auto pos = torch::tensor({1}, torch::kLong);
  auto before = fused::decode_attention(q, kc, vc, pos);
  kc[0][0][2].fill_(50.0);
  vc[0][0][2].fill_(50.0);
  EXPECT_EQ(max_abs(before, fused::decode_attention(q, kc, vc, pos)), 0.0);
  kc[0][0][1].fill_(50.0);  // the last key it does see
  EXPECT_GT(max_abs(before, fused::decode_attention(q, kc, vc, pos)), 1e-3);
}

TEST(FusedDecode, SiluMulMatchesComposition) {
  for (const auto& [t, eps] : kTolerances) {
    auto gu = randn({4, 2 * 24}, t, 13);
    auto g = gu.narrow(1, 0, 24), u = gu.narrow(1, 24, 24);
    auto want = torch::silu(g) * u;
    // silu's exp differs in the last float bit between ATen's vector code and libm.
    // bf16: one ulp of the largest value (2^-7 relative).
    const double bound = t == torch::kBFloat16 ? want.abs().max().item<double>() / 128 : eps * 10;
    EXPECT_LE(max_abs(fused::silu_mul(g, u), want), bound) << t;
    EXPECT_GT(max_abs(fused::silu_mul(u, g), want), 1e-2);  // gate and up are not symmetric
  }
}

// A tiny model with GQA and q/k/v biases (Qwen2's layout).
CausalLM tiny_model(uint64_t seed) {
  return init_causal_lm(test::tiny_model_config(), 0.3, seed, torch::kCPU);
}

// Logits of `steps` decode steps from a prefix of 3 tokens per row (rows at different
// positions), with the fused path on or off.
torch::Tensor decode_logits(CausalLM& m, bool fused, torch::ScalarType dtype) {
  torch::NoGradGuard ng;
  m->fused_decode = fused;
  const auto& cfg = m->config();
  kv_cache cache(cfg, 4, 16, torch::kCPU, dtype);
  std::vector<torch::Tensor> k, v;
  auto ids = torch::tensor({{3, 5, 7}, {2, 9, 4}, {8, 1, 6}}, torch::kLong);
  auto pos = torch::arange(3, torch::kLong).unsqueeze(0).expand({3, 3}).contiguous();
  m->prefill(ids, pos, torch::tensor({2, 2, 2}, torch::kLong), k, v);
  for (int64_t row = 0; row < 3; ++row)
    cache.write_prefix(row, k, v, row, 3);
  std::vector<torch::Tensor> out;
  auto tok = torch::tensor({4, 4, 4}, torch::kLong);
  auto p = torch::tensor({3, 3, 3}, torch::kLong);
  for (int step = 0; step < 4; ++step) {
    auto logits = m->decode(tok, p, p.max().item<int64_t>() + 1, cache);
    out.push_back(logits);
    tok = (tok * 7 + step) % cfg.vocab_size;  // fixed inputs: both paths see the same tokens
    p = p + torch::tensor({1, 1, 0}, torch::kLong) * (step % 2) + torch::tensor({0, 0, 1});
  }
  return torch::stack(out);
}

TEST(FusedDecode, DecodeStepMatchesTheComposedStep) {
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto m = tiny_model(21);
    if (dtype == torch::kDouble) cast_parameters(*m, dtype);
    auto composed = decode_logits(m, false, dtype);
    auto fused = decode_logits(m, true, dtype);
    EXPECT_LE(max_abs(fused, composed), dtype == torch::kDouble ? 1e-11 : 2e-5) << dtype;
    m->pack_projections();
    auto packed = decode_logits(m, true, dtype);
    EXPECT_LE(max_abs(packed, composed), dtype == torch::kDouble ? 1e-11 : 2e-5) << dtype;
    // The packed composition (one q/k/v matmul, then the composed attention) too.
    EXPECT_LE(max_abs(decode_logits(m, false, dtype), composed),
              dtype == torch::kDouble ? 1e-11 : 2e-5);
  }
  // bf16 activations and cache (a bf16 rollouter): both paths round at the same places but
  // sum in other orders, so neither is the reference; against the same weights in float64, the
  // fused step's error is no larger than the composed step's (x1.5, plus one bf16 ulp of the
  // largest logit).
  auto m = tiny_model(22);
  cast_parameters(*m, torch::kBFloat16);
  auto composed = decode_logits(m, false, torch::kBFloat16);
  m->pack_projections();
  auto fused = decode_logits(m, true, torch::kBFloat16);
  auto exact = tiny_model(22);
  cast_parameters(*exact, torch::kBFloat16);
  cast_parameters(*exact, torch::kDouble);
  auto truth = decode_logits(exact, false, torch::kDouble);
  const double err_composed = max_abs(composed, truth), err_fused = max_abs(fused, truth);
  EXPECT_LE(err_fused, 1.5 * err_composed + truth.abs().max().item<double>() / 128)
      << "fused " << err_fused << ", composed " << err_composed;
  // A different model really moves the logits (the check above can fail).
  auto other = tiny_model(23);
  cast_parameters(*other, torch::kBFloat16);
  EXPECT_GT(max_abs(decode_logits(other, true, torch::kBFloat16), composed), 0.5);
}

TEST(FusedDecode, PackingKeepsNamesAndValuesAndSurvivesLoads) {
  auto m = tiny_model(31);
  std::vector<std::pair<std::string, torch::Tensor>> before;
  for (auto& [n, p] : m->ordered_parameters())
    before.emplace_back(n, p.clone());
  m->pack_projections();
  auto after = m->ordered_parameters();
  ASSERT_EQ(after.size(), before.size());
  int packed = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, before[i].first);
    EXPECT_TRUE(after[i].second.equal(before[i].second)) << after[i].first;
    packed += m->is_packed(after[i].second);
  }
  const auto& cfg = m->config();
  EXPECT_EQ(packed, cfg.num_hidden_layers * (3 + (cfg.attention_bias ? 3 : 0) + 2));

  // An aliasing load copies into the packed parameters (still packed, the snapshot untouched)
  // and re-points the others at the snapshot.
  auto source = tiny_model(32);
  auto snap = snapshot_weights(*source, 1);
  load_snapshot(*m, snap, /*alias=*/true);
  for (auto& [name, p] : m->ordered_parameters()) {
    bool found = false;
    for (auto& [n2, q] : source->ordered_parameters())
      if (n2 == name) {
        EXPECT_TRUE(p.equal(q)) << name;
        found = true;
      }
    EXPECT_TRUE(found);
  }
  auto* layer = m->model->layers->children().front()->as<DecoderLayerImpl>();
  EXPECT_TRUE(layer->self_attn->packed());
  EXPECT_TRUE(layer->mlp->packed());
  // Re-pointing one projection (as a cast does) unpacks that layer: the fused step falls back.
  layer->mlp->up_proj->weight.set_data(layer->mlp->up_proj->weight.clone());
  EXPECT_FALSE(layer->mlp->packed());
  auto composed = decode_logits(m, false, torch::kFloat);
  EXPECT_LE(max_abs(decode_logits(m, true, torch::kFloat), composed), 2e-5);
}

// ATen operators dispatched by `f` (RecordFunction, nested calls included, ours counted too).
template <typename F>
int64_t count_ops(F&& f) {
  static thread_local int64_t n = 0;
  n = 0;
  auto handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction&)
                                     -> std::unique_ptr<at::ObserverContext> {
        ++n;
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  f();
  at::removeCallback(handle);
  return n;
}

TEST(FusedDecode, StepDispatchesAThirdOfTheOperatorsOrFewer) {
  auto m = tiny_model(41);
  m->pack_projections();
  torch::NoGradGuard ng;
  const auto& cfg = m->config();
  kv_cache cache(cfg, 4, 16, torch::kCPU);
  auto tok = torch::tensor({4, 4, 4, 4}, torch::kLong);
  auto pos = torch::tensor({0, 1, 2, 3}, torch::kLong);
  m->fused_decode = false;
  const auto composed = count_ops([&] { m->decode(tok, pos, 4, cache); });
  m->fused_decode = true;
  const auto fused = count_ops([&] { m->decode(tok, pos, 4, cache); });
  RecordProperty("composed_ops", static_cast<int>(composed));
  RecordProperty("fused_ops", static_cast<int>(fused));
  EXPECT_GT(fused, 0);
  EXPECT_LE(3 * fused, composed) << "fused " << fused << ", composed " << composed;
}

}  // namespace

namespace {

// The CUDA kernels (fused_decode_cuda.cu) against the same compositions, on the GPU: skipped
// where there is none (CI), run by the first session that has one.
TEST(FusedDecode, CudaKernelsMatchTheCompositionOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device gpu(torch::kCUDA);
  const int64_t B = 5, H = 14, KVH = 2, D = 64, L = 40, G = H / KVH;
  // float32: sums in another order (and __expf); bf16: one ulp of values ~4.
  for (const auto& [t, eps] : {tol{torch::kFloat, 1e-4}, tol{torch::kBFloat16, 6e-2}}) {
    ASSERT_TRUE(fused::supported(torch::empty({1}, torch::TensorOptions(t).device(gpu)), D));
    auto r = randn({B, 896}, t, 51).to(gpu), x = randn({B, 896}, t, 52).to(gpu);
    auto w = randn({896}, torch::kFloat, 53).to(gpu);
    auto [sum, norm] = fused::add_rms_norm(r, x, w, 1e-6);
    EXPECT_EQ(max_abs(sum, r + x), 0.0) << t;
    EXPECT_LE(max_abs(norm, rms_norm_ref(r + x, w, 1e-6)), eps) << t;

    auto all = randn({B, (H + 2 * KVH) * D}, t, 54).to(gpu);
    auto q = all.narrow(1, 0, H * D), k = all.narrow(1, H * D, KVH * D);
    auto v = all.narrow(1, (H + KVH) * D, KVH * D);
    auto angles = randn({B, 1, 1, D}, torch::kFloat, 55).to(gpu);
    auto c = angles.cos().to(t), s = angles.sin().to(t);
    auto pos = torch::tensor({0, 7, 39, 12, 3}, torch::kLong).to(gpu);
    auto kc = randn({B, KVH, L, D}, t, 56).to(gpu), vc = randn({B, KVH, L, D}, t, 57).to(gpu);
    auto qr = fused::rope_write_cache(q, k, v, c, s, pos, kc, vc);
    auto c3 = c.reshape({B, 1, D}), s3 = s.reshape({B, 1, D});
    EXPECT_LE(max_abs(qr, rope_ref(q.reshape({B, H, D}), c3, s3)), t == torch::kFloat ? 1e-6 : 0.0)
        << t;
    auto want_k = rope_ref(k.reshape({B, KVH, D}), c3, s3);
    auto pos_h = pos.cpu();
    for (int64_t b = 0; b < B; ++b) {
      const auto p = pos_h[b].item<int64_t>();
      EXPECT_LE(max_abs(kc[b].select(1, p), want_k[b]), t == torch::kFloat ? 1e-6 : 0.0) << t;
      EXPECT_EQ(max_abs(vc[b].select(1, p), v[b].reshape({KVH, D})), 0.0) << t;
    }

    auto got = fused::decode_attention(qr, kc, vc, pos).view({B, H, D});
    for (int64_t b = 0; b < B; ++b) {
      const auto n = pos_h[b].item<int64_t>() + 1;
      for (int64_t h = 0; h < H; ++h) {
        auto keys = kc[b][h / G].narrow(0, 0, n), values = vc[b][h / G].narrow(0, 0, n);
        auto scores = torch::matmul(keys, qr[b][h]).to(torch::kFloat);
        auto probs = torch::softmax(scores / std::sqrt(double(D)), -1).to(t);
        EXPECT_LE(max_abs(got[b][h], torch::matmul(probs, values)), eps) << t << " " << b << h;
      }
    }

    auto gu = randn({B, 2 * 4864}, t, 58).to(gpu);
    auto g = gu.narrow(1, 0, 4864), u = gu.narrow(1, 4864, 4864);
    auto want = torch::silu(g) * u;
    const double bound = t == torch::kBFloat16 ? want.abs().max().item<double>() / 128 : 1e-5;
    EXPECT_LE(max_abs(fused::silu_mul(g, u), want), bound) << t;
  }
}

}  // namespace

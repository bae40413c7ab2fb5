// policy_optimizer: the fused AdamW kernel (libtorch 2.x) against libtorch's reference AdamW,
// and its state moving between the two through save/load.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/train/optimizer.hpp"

namespace asyncrl {
namespace {

std::vector<torch::Tensor> make_params(uint64_t seed) {
  torch::manual_seed(static_cast<int64_t>(seed));
  std::vector<torch::Tensor> p;
  for (auto shape : {std::vector<int64_t>{7, 5}, {5}, {3, 2, 4}})
    p.push_back(torch::randn(shape).set_requires_grad(true));
  return p;
}

// Fresh random gradients (seeded by step) on every parameter.
void set_grads(std::vector<torch::Tensor>& ps, int step) {
  torch::manual_seed(1000 + step);
  for (auto& p : ps)
    p.mutable_grad() = torch::randn_like(p) * 3.0;
}

double max_diff(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  double d = 0;
  for (size_t i = 0; i < a.size(); ++i)
    d = std::max(d, (a[i] - b[i]).abs().max().item<double>());
  return d;
}

optimizer_options opts(bool fused) {
  optimizer_options o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.grad_clip = 1.0;  // the random gradients' norm is ~20: every step clips
  o.fused = fused;
  return o;
}

TEST(FusedAdamW, MatchesTheReferenceAdamW) {
  if (!fused_adamw_available()) GTEST_SKIP() << "libtorch 1.x has no fused AdamW";
  auto a = make_params(1), b = make_params(1);
  policy_optimizer fused(a, opts(true)), ref(b, opts(false));
  for (int step = 1; step <= 4; ++step) {
    set_grads(a, step);
    set_grads(b, step);
    auto oa = fused.step(1e-2 / step), ob = ref.step(1e-2 / step);
    EXPECT_EQ(oa.grad_norm, ob.grad_norm);
    // float32 parameters of size ~1 after steps of ~1e-2: the two kernels round differently
    // (fused keeps the bias corrections in one expression), to a few float32 ulps.
    EXPECT_LE(max_diff(a, b), 2e-6) << "step " << step;
    EXPECT_GT(max_diff(a, make_params(1)), 1e-3) << "the step moved nothing";
  }
}

TEST(FusedAdamW, StateMovesToTheReferenceThroughACheckpoint) {
  if (!fused_adamw_available()) GTEST_SKIP() << "libtorch 1.x has no fused AdamW";
  auto a = make_params(2);
  policy_optimizer fused(a, opts(true));
  for (int step = 1; step <= 2; ++step) {
    set_grads(a, step);
    fused.step(1e-2);
  }
  torch::serialize::OutputArchive out;
  fused.save(out);
  std::ostringstream bytes;
  out.save_to(bytes);
  // Continue once more in each: fused as is, and the reference loaded from the checkpoint of
  // copies of the same weights. A step count lost in the fused path's state (bias correction
  // as at step 1) moves the weights by far more than the tolerance.
  std::vector<torch::Tensor> b;
  for (auto& p : a)
    b.push_back(p.detach().clone().set_requires_grad(true));
  policy_optimizer ref(b, opts(false));
  torch::serialize::InputArchive in;
  std::istringstream is(bytes.str());
  in.load_from(is);
  ref.load(in);
  set_grads(a, 3);
  set_grads(b, 3);
  fused.step(1e-2);
  ref.step(1e-2);
  EXPECT_LE(max_diff(a, b), 2e-6);
}

TEST(FusedAdamW, SkippedStepLeavesWeightsAndState) {
  auto a = make_params(3);
  auto before = make_params(3);
  policy_optimizer o(a, opts(true));
  set_grads(a, 1);
  a[1].mutable_grad()[0] = std::numeric_limits<float>::infinity();
  auto r = o.step(1e-2);
  EXPECT_TRUE(r.skipped);
  EXPECT_EQ(max_diff(a, before), 0.0);
  EXPECT_EQ(o.steps(), 0);
}

}  // namespace
}  // namespace asyncrl

namespace asyncrl {
namespace {

// policy_trainer::step() with a single micro-batch divides the float32 gradient by the token
// count in float32 (one _foreach_div_), where several micro-batches go through float64 sums
// divided in float64 and rounded to float32. The two agree bit for bit because float64 has more
// than 2 * 24 + 2 bits (a float32 quotient rounded twice is rounded once). Checked here on
// random gradients, tiny and huge, and counts up to 2^24. Catches a kernel that multiplies by a
// rounded reciprocal instead of dividing.
TEST(SingleMicroBatch, Float32DivisionIsTheRoundedFloat64Division) {
  torch::manual_seed(7);
  auto g = torch::randn({100000}) * torch::exp(torch::randn({100000}) * 20);  // wide exponents
  for (double n : {1.0, 3.0, 7.0, 1000.0, 4097.0, 65537.0, 16777215.0}) {
    std::vector<torch::Tensor> list{g.clone()};
    at::_foreach_div_(list, at::Scalar(n));
    auto want = (g.to(torch::kDouble) / n).to(torch::kFloat);
    EXPECT_TRUE(torch::equal(list[0], want)) << "count " << n;
  }
}

}  // namespace
}  // namespace asyncrl

#include "runtime/train/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "runtime/common/torch_compat.hpp"

#include <torch/version.h>

namespace asyncrl {

policy_optimizer::policy_optimizer(std::vector<torch::Tensor> params, optimizer_options opt)
    : params_(std::move(params)), opt_(opt) {
  adam_ = std::make_unique<torch::optim::AdamW>(params_, torch::optim::AdamWOptions(opt.lr)
                                                             .betas({opt.beta1, opt.beta2})
                                                             .eps(opt.eps)
                                                             .weight_decay(opt.weight_decay));
}

void policy_optimizer::zero_grad() {
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad().zero_();
}

bool fused_adamw_available() {
#if TORCH_VERSION_MAJOR >= 2
  return true;
#else
  return false;
#endif
}

namespace {

// A gradient's float64 square sum, without a float64 copy of the whole gradient: float32
// elements go to float64 a slice of at most kNormSlice at a time (exact), are squared and summed
// in float64. A gradient within one slice sums exactly as before (one float64 reduction); a
// larger one sums its slices' sums, which differs only in float64 rounding (~1e-16 relative).
// Before, the copy and its square were two float64 temporaries of the largest parameter (the
// 151,936 x 896 embedding: 1.1 GB each).
constexpr int64_t kNormSlice = int64_t{1} << 22;  // elements: 32 MB of float64

torch::Tensor square_sum64(const torch::Tensor& g) {
  if (g.scalar_type() == torch::kDouble || g.numel() <= kNormSlice)
    return g.to(torch::kDouble).pow(2).sum();
  const auto flat = g.reshape({-1});
  std::vector<torch::Tensor> parts;
  for (int64_t s = 0; s < flat.numel(); s += kNormSlice)
    parts.push_back(flat.narrow(0, s, std::min(kNormSlice, flat.numel() - s))
                        .to(torch::kDouble)
                        .pow_(2)
                        .sum());
  return torch::stack(parts).sum();
}

}  // namespace

double global_grad_norm(const std::vector<torch::Tensor>& grads) {
  std::vector<torch::Tensor> sq;
  for (auto& g : grads)
    sq.push_back(square_sum64(g));
  double total = 0.0;
  if (!sq.empty()) {
    const auto host = torch::stack(sq).cpu();
    const double* d = host.data_ptr<double>();
    for (int64_t i = 0; i < host.numel(); ++i)
      total += d[i];
  }
  return std::sqrt(total);
}

step_outcome policy_optimizer::step(double lr, bool loss_finite, std::optional<double> known_norm) {
  step_outcome out;
  // Global L2 norm: each gradient's float64 square sum on its device, then one host read and
  // the same left-to-right float64 sum as a loop over parameters (no read per parameter).
  std::vector<torch::Tensor> grads;
  for (auto& p : params_)
    if (p.grad().defined()) grads.push_back(p.grad());
  out.grad_norm = known_norm ? *known_norm : global_grad_norm(grads);
  if (!loss_finite || !std::isfinite(out.grad_norm)) {
    if (!loss_finite && std::isfinite(out.grad_norm)) out.grad_norm = NAN;
    out.skipped = true;
    ++skipped_;
    zero_grad();
    return out;
  }
  if (opt_.grad_clip > 0 && out.grad_norm > opt_.grad_clip) {
    const double scale = opt_.grad_clip / (out.grad_norm + 1e-6);
    torch::NoGradGuard ng;
    at::_foreach_mul_(grads, scale);
  }
  for (auto& group : adam_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  if (opt_.fused && fused_adamw_available())
    fused_step(lr);
  else
    adam_->step();
  ++steps_;
  return out;
}

void policy_optimizer::fused_step(double lr) {
#if TORCH_VERSION_MAJOR >= 2
  torch::NoGradGuard ng;
  using state_map = std::decay_t<decltype(adam_->state())>;
  auto& states = adam_->state();
  if (fused_steps_.size() != params_.size()) fused_steps_.assign(params_.size(), {});
  std::vector<torch::Tensor> ps, gs, m, v, steps;
  std::vector<torch::optim::AdamWParamState*> touched;
  for (size_t i = 0; i < params_.size(); ++i) {
    auto& p = params_[i];
    if (!p.grad().defined()) continue;
    const auto key = compat::optimizer_state_key<state_map>(p);
    auto it = states.find(key);
    if (it == states.end()) {
      // What torch::optim::AdamW creates on a parameter's first step.
      auto st = std::make_unique<torch::optim::AdamWParamState>();
      st->step(0);
      st->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
      st->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
      it = states.emplace(key, std::move(st)).first;
      fused_steps_[i] = torch::Tensor();
    }
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    if (!fused_steps_[i].defined())
      fused_steps_[i] =
          torch::full({}, static_cast<double>(st.step()), p.options().dtype(torch::kFloat32));
    ps.push_back(p);
    gs.push_back(p.grad());
    m.push_back(st.exp_avg());
    v.push_back(st.exp_avg_sq());
    steps.push_back(fused_steps_[i]);
    touched.push_back(&st);
  }
  if (ps.empty()) return;
  // The kernel reads the incremented count, as torch.optim.AdamW(fused=True) does.
  at::_foreach_add_(steps, 1.0);
  at::_fused_adamw_(ps, gs, m, v, /*max_exp_avg_sqs=*/{}, steps, lr, opt_.beta1, opt_.beta2,
                    opt_.weight_decay, opt_.eps, /*amsgrad=*/false, /*maximize=*/false);
  for (auto* st : touched)
    st->step(st->step() + 1);  // the host count that save() writes
#else
  (void)lr;
  adam_->step();
#endif
}

std::optional<adam_moments> policy_optimizer::moments(size_t i) const {
  using state_map = std::decay_t<decltype(adam_->state())>;
  auto it = adam_->state().find(compat::optimizer_state_key<state_map>(params_.at(i)));
  if (it == adam_->state().end()) return std::nullopt;
  const auto& st = static_cast<const torch::optim::AdamWParamState&>(*it->second);
  return adam_moments{st.step(), st.exp_avg(), st.exp_avg_sq()};
}

void policy_optimizer::set_moments(size_t i, const adam_moments& m) {
  using state_map = std::decay_t<decltype(adam_->state())>;
  auto st = std::make_unique<torch::optim::AdamWParamState>();
  st->step(m.step);
  st->exp_avg(m.exp_avg);
  st->exp_avg_sq(m.exp_avg_sq);
  adam_->state()[compat::optimizer_state_key<state_map>(params_.at(i))] = std::move(st);
  fused_steps_.clear();  // rebuilt from the step counts
}

namespace {

// "[3, 4]" for error messages.
std::string shape_text(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A moment tensor of parameter `i` must have the parameter's shape and dtype; a mismatch means
// the state belongs to another model and AdamW would fail (or broadcast) at the next step.
void check_moment(size_t i, const char* what, const torch::Tensor& m, const torch::Tensor& p) {
  if (!m.defined()) return;
  if (m.sizes() != p.sizes() || m.scalar_type() != p.scalar_type())
    throw std::runtime_error("optimizer state: parameter #" + std::to_string(i) + " " + what +
                             " is " + shape_text(m.sizes()) + " " +
                             std::string(c10::toString(m.scalar_type())) + ", the parameter is " +
                             shape_text(p.sizes()) + " " +
                             std::string(c10::toString(p.scalar_type())));
}

}  // namespace

void policy_optimizer::save(torch::serialize::OutputArchive& ar) const {
  torch::serialize::OutputArchive adam(ar.compilation_unit());
  adam_->save(adam);
  ar.write("adamw", adam);
  ar.write("steps", c10::IValue(steps_));
  ar.write("skipped", c10::IValue(skipped_));
  ar.write("params", c10::IValue(static_cast<int64_t>(params_.size())));
}

void policy_optimizer::load(torch::serialize::InputArchive& ar) {
  c10::IValue steps, skipped, count;
  ar.read("steps", steps);
  ar.read("skipped", skipped);
  ar.read("params", count);
  if (count.toInt() != static_cast<int64_t>(params_.size()))
    throw std::runtime_error("optimizer state: " + std::to_string(count.toInt()) +
                             " parameters in the state, " + std::to_string(params_.size()) +
                             " in this optimizer");
  // Loaded into a scratch AdamW over the same tensors (AdamW keys its state by tensor
  // identity), checked, then moved over: a bad state leaves this optimizer as it was.
  torch::optim::AdamW scratch(params_,
                              static_cast<const torch::optim::AdamWOptions&>(adam_->defaults()));
  torch::serialize::InputArchive adam;
  ar.read("adamw", adam);
  scratch.load(adam);
  for (size_t i = 0; i < params_.size(); ++i) {
    using state_map = std::decay_t<decltype(scratch.state())>;
    auto it = scratch.state().find(compat::optimizer_state_key<state_map>(params_[i]));
    if (it == scratch.state().end()) continue;  // no step yet touched it
    auto& st = static_cast<torch::optim::AdamWParamState&>(*it->second);
    check_moment(i, "exp_avg", st.exp_avg(), params_[i]);
    check_moment(i, "exp_avg_sq", st.exp_avg_sq(), params_[i]);
    check_moment(i, "max_exp_avg_sq", st.max_exp_avg_sq(), params_[i]);
  }
  adam_->state() = std::move(scratch.state());
  fused_steps_.clear();  // rebuilt from the loaded step counts
  steps_ = steps.toInt();
  skipped_ = skipped.toInt();
}

}  // namespace asyncrl

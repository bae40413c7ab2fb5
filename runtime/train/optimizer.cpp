#include "runtime/train/optimizer.hpp"

#include <cmath>

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

step_outcome policy_optimizer::step(double lr, bool loss_finite) {
  step_outcome out;
  // Global L2 norm over all gradients, accumulated in float64 on the host side of the sum.
  torch::Tensor sq = torch::zeros({}, torch::kDouble);
  for (auto& p : params_)
    if (p.grad().defined()) sq = sq + p.grad().to(torch::kDouble).pow(2).sum().cpu();
  out.grad_norm = std::sqrt(sq.item<double>());
  if (!loss_finite || !std::isfinite(out.grad_norm)) {
    if (!loss_finite && std::isfinite(out.grad_norm)) out.grad_norm = NAN;
    out.skipped = true;
    ++skipped_;
    zero_grad();
    return out;
  }
  if (opt_.grad_clip > 0 && out.grad_norm > opt_.grad_clip) {
    const double scale = opt_.grad_clip / (out.grad_norm + 1e-6);
    for (auto& p : params_)
      if (p.grad().defined()) p.mutable_grad().mul_(scale);
  }
  for (auto& group : adam_->param_groups())
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
  adam_->step();
  ++steps_;
  return out;
}

}  // namespace asyncrl

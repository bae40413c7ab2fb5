#pragma once

// AdamW with global grad-norm clipping and a guard that skips non-finite steps. Pulls in torch.

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>

#include <memory>

namespace asyncrl {

struct optimizer_options {
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 = no clipping
};

/// What one step did.
struct step_outcome {
  double grad_norm = 0.0;  // before clipping; NaN/inf when skipped for that reason
  bool skipped = false;    // non-finite loss or gradients: nothing was changed
};

class policy_optimizer {
 public:
  policy_optimizer(std::vector<torch::Tensor> params, optimizer_options opt);

  void zero_grad();
  /// Sets the learning rate, then: if `loss_finite` is false or any gradient is not finite,
  /// zeroes the gradients and returns skipped (weights and Adam state untouched); else clips
  /// to grad_clip and takes an AdamW step.
  step_outcome step(double lr, bool loss_finite = true);
  int64_t skipped_steps() const { return skipped_; }
  int64_t steps() const { return steps_; }

 private:
  std::vector<torch::Tensor> params_;
  optimizer_options opt_;
  std::unique_ptr<torch::optim::AdamW> adam_;
  int64_t skipped_ = 0;
  int64_t steps_ = 0;
};

}  // namespace asyncrl

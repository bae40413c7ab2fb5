#pragma once

// AdamW with global grad-norm clipping and a guard that skips non-finite steps. Pulls in torch.

#include <torch/nn/module.h>
#include <torch/optim/adamw.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <optional>

namespace asyncrl {

struct optimizer_options {
  double lr = 1e-3;
  double weight_decay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double grad_clip = 1.0;  // 0 = no clipping
  /// The multi-tensor fused AdamW kernel (one launch for every parameter instead of about ten
  /// per parameter) where libtorch has it (2.x, CPU and CUDA); otherwise, and when false,
  /// libtorch's reference torch::optim::AdamW. Same update to float32 rounding; the state
  /// (moments, step counts) is the same either way, so checkpoints move between the two.
  bool fused = true;
};

/// Whether this libtorch has the fused AdamW kernel (libtorch 2.x).
bool fused_adamw_available();

/// What one step did.
struct step_outcome {
  double grad_norm = 0.0;  // before clipping; NaN/inf when skipped for that reason
  bool skipped = false;    // non-finite loss or gradients: nothing was changed
};

/// The global L2 norm of `grads`: each tensor's float64 square sum, added left to right in
/// float64 on the host (one host read). Every rank of a data-parallel group computes it over the
/// same reduced gradients, so they all get the same bits.
double global_grad_norm(const std::vector<torch::Tensor>& grads);

/// One parameter's AdamW state: its step count and moments (the parameter's shape and dtype).
struct adam_moments {
  int64_t step = 0;
  torch::Tensor exp_avg, exp_avg_sq;
};

class policy_optimizer {
 public:
  policy_optimizer(std::vector<torch::Tensor> params, optimizer_options opt);

  void zero_grad();
  /// Sets the learning rate, then: if `loss_finite` is false or any gradient is not finite,
  /// zeroes the gradients and returns skipped (weights and Adam state untouched); else clips
  /// to grad_clip and takes an AdamW step.
  /// `known_norm`: the global gradient norm computed elsewhere (a sharded optimizer holds only
  /// its shard's gradients; the norm that clips them is the whole model's).
  step_outcome step(double lr, bool loss_finite = true,
                    std::optional<double> known_norm = std::nullopt);
  int64_t skipped_steps() const { return skipped_; }
  int64_t steps() const { return steps_; }
  /// The counters a sharded optimizer restores from a gathered state.
  void set_counters(int64_t steps, int64_t skipped) { steps_ = steps, skipped_ = skipped; }

  /// Parameter i's state, or nothing before its first step.
  std::optional<adam_moments> moments(size_t i) const;
  /// Replaces parameter i's state (shapes and dtypes as the parameter's; not checked here).
  void set_moments(size_t i, const adam_moments& m);

  /// AdamW's state (moments and per-parameter step counts, bitwise) and the step and skip
  /// counters, for checkpoints. The options (lr, betas...) are not saved: they come from the
  /// config, and step() sets the lr each time.
  void save(torch::serialize::OutputArchive& ar) const;
  /// Restores save()'s state into an optimizer over parameters of the same shapes and dtypes.
  /// Throws std::runtime_error naming the parameter by index for a state that does not fit,
  /// c10::Error for an unreadable archive; everything is checked before anything is replaced,
  /// so after a throw this optimizer is unchanged.
  void load(torch::serialize::InputArchive& ar);

 private:
  std::vector<torch::Tensor> params_;
  optimizer_options opt_;
  std::unique_ptr<torch::optim::AdamW> adam_;
  int64_t skipped_ = 0;
  int64_t steps_ = 0;
  // The fused path's per-parameter step counts as float32 tensors on the parameters' device
  // (what the kernel reads); rebuilt from the AdamW state after load().
  std::vector<torch::Tensor> fused_steps_;
  void fused_step(double lr);
};

}  // namespace asyncrl

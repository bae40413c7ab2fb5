#pragma once

// The tri-model trainer (docs/algorithms.md §9, §12): the policy being trained, the old policy (the
// weights at the start of the current batch: the generator's weights in the on-policy modes,
// the proximal policy in the asynchronous ones) and the frozen reference. Micro-batches stream
// in any order; gradients accumulate as un-normalised sums and are divided by the mini-batch's
// token (or sequence) count at the step, so any partition into micro-batches gives the
// full-batch update (Theorem 1, Proposition 2). Pulls in torch.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/model/model.hpp"
#include "runtime/train/losses.hpp"
#include "runtime/train/lr_schedule.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/policy_trainer_params.hpp"
#include "runtime/train/samples.hpp"
#include "runtime/train/update_stats.hpp"

namespace asyncrl {

struct packed_batch;
class dist_group;
class sharded_optimizer;
class dp_commands;
class grad_reducer;

class policy_trainer {
 public:
  /// Takes over the policy (converting it to float64 when params.precision says so; with bf16
  /// it stays float32 and computes in bf16) and copies it into the old and reference models
  /// (frozen), each only when the loss or the metrics read it (needs_old, needs_ref).
  policy_trainer(CausalLM policy, policy_trainer_params params);
  ~policy_trainer();

  /// Makes this trainer one rank of a data-parallel group (docs/scaling.md): rank 0's weights
  /// (policy, old, reference) are broadcast to every rank, and each step() sums the ranks'
  /// gradients and mini-batch counts before it normalises, so W ranks that each accumulate
  /// their share of a step's micro-batches take the update one trainer would take on all of
  /// them. With `shard_optimizer` the AdamW state is split over the ranks
  /// (sharded_optimizer.hpp). Call before the first accumulate(); `group` must outlive this
  /// trainer. Collective: every rank calls it, and then step(), save_state() together.
  void join_data_parallel(dist_group& group, bool shard_optimizer);
  /// Rank 0 of a multi-process group: every call below that the other ranks must replay is
  /// posted to them first, and each micro-batch goes to the rank `cmds` routes it to (dp_leader).
  /// `cmds` must outlive this trainer; null detaches.
  void set_commands(dp_commands* cmds) { cmds_ = cmds; }
  /// Bytes of AdamW moments this rank holds (a sharded optimizer's shard, or the whole model's).
  int64_t optimizer_state_bytes() const;

  /// old <- policy: call when a new batch of rollouts starts (the weights the rollouters get).
  /// The old model then holds this version's weights (the rollout mismatch metrics use it).
  void begin_batch();
  /// Forward (policy with gradients; old and reference without), loss, backward for one
  /// micro-batch. The samples' advantages must be set. Throws std::invalid_argument on bad
  /// input (empty batch, mismatched lengths, a token version newer than the policy).
  /// `last`: no other micro-batch comes before step(). A data-parallel rank then sums its
  /// gradients with the other ranks while the backward runs (p.overlap_grad_reduce), and rank 0
  /// of a multi-process group tells every other rank to start its sum too.
  void accumulate(const std::vector<const scored_sample*>& micro, bool last = false);
  /// A data-parallel rank's gradient sums are complete: their sum over the ranks starts now, and
  /// step() waits for it. Collective (every rank closes, by this call, by accumulate(..., true),
  /// or inside step()). Does nothing outside a group or when the sum has already started.
  void close_gradients();
  /// Normalises the accumulated gradients, clips, and steps AdamW (or skips a non-finite
  /// step, leaving weights and optimizer state untouched). Returns the step's metrics.
  update_stats step();

  /// The gradient the next step() would apply (accumulated sums / the mini-batch's token or
  /// sequence count), before clipping. For tests and diagnostics.
  std::vector<at::Tensor> pending_gradient() const;

  /// Drops what accumulate() gathered since the last step (gradients and the mini-batch's
  /// metric sums): the trainer is again between steps, with the weights and AdamW state of its
  /// last step, so save_state() is valid. For a checkpoint cut while a step gathers its groups.
  void discard_pending();

  /// Everything needed to continue training bitwise: the policy, old and reference
  /// parameters in their own dtype, the AdamW state, the lr-schedule position (steps taken),
  /// the version and the skipped-step count. Only valid between steps (no gradient pending):
  /// throws std::logic_error after accumulate() without a step(). The params (lr schedule,
  /// loss...) are not saved: the trainer that loads must be built from the same ones.
  std::string save_state() const;
  /// Restores save_state()'s bytes into a trainer built with the same model config and params.
  /// Throws std::runtime_error naming the first mismatching tensor (name, shape or dtype), or
  /// saying why the bytes are unreadable; everything is checked before anything is replaced,
  /// so after a throw this trainer is unchanged. Drops any gradient pending here.
  void load_state(const std::string& bytes);

  /// A new peak learning rate for the steps to come (the console's `set trainer.lr`); the lr
  /// schedule keeps its shape and position.
  void set_lr(double lr);

  /// Successful optimizer steps so far: the version of the current policy weights.
  int64_t version() const { return version_; }
  void set_version(int64_t v) { version_ = v; }
  int64_t skipped_steps() const;
  CausalLM policy() const { return policy_; }
  /// The frozen copies; null when the params never read them (needs_old, needs_ref).
  CausalLM old_policy() const { return old_; }
  CausalLM reference() const { return ref_; }
  /// The loss reads the old model's log-probs: grpo without use_rollout_logprobs, or the
  /// decoupled loss with prox_logp = recompute.
  bool needs_old() const;
  /// The reference forward runs: kl_coef > 0 or compute_ref.
  bool needs_ref() const;

  /// Per-token log-probs (N,) of the samples' responses under `model`, flattened sample by
  /// sample in the given order; no gradient. For tests and checks (rollout vs trainer).
  at::Tensor response_logprobs(CausalLMImpl& model,
                               const std::vector<const scored_sample*>& samples);

 private:
  // Log-probs (N,) in pack order of an already packed batch; no gradient.
  at::Tensor packed_logprobs(CausalLMImpl& model, const packed_batch& b);

  CausalLM policy_{nullptr}, old_{nullptr}, ref_{nullptr};
  policy_trainer_params p_;
  rl::loss_config loss_cfg_;
  std::unique_ptr<policy_optimizer> optimizer_;  // null when sharded_ steps instead
  std::unique_ptr<sharded_optimizer> sharded_;
  dist_group* dp_ = nullptr;     // the data-parallel group, if this trainer is one of its ranks
  dp_commands* cmds_ = nullptr;  // rank 0 of a multi-process group: the other ranks' commands
  std::unique_ptr<grad_reducer> reducer_;  // the ranks' gradient sums, in fixed buckets
  // This rank's sum of parameter i's gradient so far (float64 accumulators or .grad), complete.
  at::Tensor rank_sum(const std::vector<at::Tensor>& params, size_t i);
  // The backward of a rank's last micro-batch, handing each parameter's final sum to reducer_
  // as the backward produces it.
  void backward_reducing(const at::Tensor& loss);
  // Waits for the ranks' sums and puts them where step() reads the gradient.
  void finish_reduction();
  update_stats step_here();
  // Data parallel: sums the ranks' gradient sums and mini-batch counts (a collective).
  void reduce_across_ranks();
  void zero_grad();
  lr_schedule schedule_;
  // The raw gradient sum of parameter i so far (float64), from the accumulators below.
  at::Tensor accumulated(size_t i) const;
  // Zeroes the mini-batch's metric sums (below): after a step, and on load_state.
  void clear_minibatch_sums();

  std::vector<at::Tensor> grad64_;     // float64 accumulators (deterministic mode), when needed
  std::vector<at::Tensor> grad64_lo_;  // float64 weights only: their TwoSum error terms
  // The mini-batch's first micro-batch gradient is still in the parameters' .grad, not yet in
  // grad64_ (moved there when a second micro-batch comes; used as is when none does).
  bool first_in_grad_ = false;
  void move_grads_to_accumulators();
  // Allocates grad64_ (and grad64_lo_) at their first use.
  void ensure_accumulators();
  int64_t version_ = 0;
  int64_t old_version_ = 0;  // the weights version in old_ (begin_batch)
  int64_t steps_taken_ = 0;
  // Accumulated over the current mini-batch.
  double loss_sum_ = 0, entropy_sum_ = 0;
  rl::loss_stats loss_st_;  // read from stat_sums_ in step()
  int64_t tokens_ = 0, samples_ = 0, processed_ = 0;
  int64_t micro_batches_ = 0;
  int64_t real_ = 0;  // non-padding tokens of them
  int64_t staleness_max_ = 0;
  double prox_ms_ = 0;
  // The mini-batch's rollout/trainer mismatch on the device: (4,) float64 = sum |x|, max |x|,
  // sum k3, token count (undefined until a micro-batch adds to it). Read once, in step().
  at::Tensor mismatch_sums_;
  // The mini-batch's loss and entropy sums and loss statistics (rl::loss_outputs::stat_sums),
  // on the device; read_minibatch_sums() brings them to the host fields above in step().
  at::Tensor loss_dev_, entropy_dev_, stat_sums_;
  static void add_device_sum(at::Tensor& acc, const at::Tensor& x);
  void read_minibatch_sums();
  // Adds one micro-batch's rollout/trainer mismatch: `train_logp` and `rollout_logp` (M, L) over
  // the response tokens where `same_weights` is true.
  void add_mismatch(const at::Tensor& train_logp, const at::Tensor& rollout_logp,
                    const at::Tensor& same_weights);
};

}  // namespace asyncrl

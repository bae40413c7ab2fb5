#pragma once

// AdamW with its state sharded over a data-parallel group (trainer.shard_optimizer, ZeRO-1
// style). Every rank holds the whole model and the whole reduced gradient; each steps only the
// elements of its shard (shard_layout.hpp), keeping AdamW moments for those alone, then each
// rank broadcasts its updated shard to the others (one shard-sized buffer at a time). The moments,
// the optimizer's share of memory (2 x 4 bytes per float32 parameter), fall W-fold.
//
// The gradient norm that clips is the whole model's (every rank computes it from the same
// reduced gradient), and AdamW is elementwise, so the update equals policy_optimizer's on the
// whole model. Pulls in torch.

#include <torch/serialize/archive.h>

#include <memory>
#include <vector>

#include "runtime/train/optimizer.hpp"
#include "runtime/train/shard_layout.hpp"

namespace asyncrl {

class dist_group;

class sharded_optimizer {
 public:
  /// `group` must outlive this optimizer.
  sharded_optimizer(std::vector<torch::Tensor> params, optimizer_options opt, dist_group& group);

  void zero_grad();
  /// The parameters' .grad must hold the full, reduced gradient (the same on every rank).
  /// Skips as policy_optimizer::step does; else clips by the global norm, steps this rank's
  /// shard and gathers the weights (a broadcast per rank). Collective: every rank calls it.
  step_outcome step(double lr, bool loss_finite = true);
  int64_t skipped_steps() const { return shard_->skipped_steps(); }

  /// policy_optimizer::save's format for the whole model: the shards are gathered, so a resume
  /// may use any number of ranks (load reshards). Collective.
  void save(torch::serialize::OutputArchive& ar) const;
  /// Reads policy_optimizer::save's format (sharded or not) and keeps this rank's shard. Not
  /// collective: every rank reads the same archive.
  void load(torch::serialize::InputArchive& ar);

  /// Bytes of AdamW moments this rank holds.
  int64_t state_bytes() const;
  const shard_layout& layout() const { return layout_; }

 private:
  std::vector<torch::Tensor> params_;  // the whole model's parameters
  optimizer_options opt_;
  dist_group& group_;
  shard_layout layout_;
  std::vector<torch::Tensor> views_;  // this rank's segments: views into params_
  std::unique_ptr<policy_optimizer> shard_;
  // A policy_optimizer over zero tensors shaped as params_, for save/load's whole-model format.
  std::unique_ptr<policy_optimizer> whole_scratch(std::vector<torch::Tensor>& holders) const;
};

}  // namespace asyncrl

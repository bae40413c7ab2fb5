#include "runtime/train/policy_trainer.hpp"

#include <chrono>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include "runtime/dist/dist_group.hpp"
#include "runtime/model/batch_invariant.hpp"
#include "runtime/model/chunked_logprobs.hpp"
#include "runtime/model/logprobs.hpp"
#include "runtime/train/dp_commands.hpp"
#include "runtime/train/grad_reducer.hpp"
#include "runtime/train/packing.hpp"
#include "runtime/train/sharded_optimizer.hpp"

namespace asyncrl {

namespace {

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

CausalLM frozen_copy(const CausalLM& src) {
  CausalLM m(src->config());
  m->set_compute_dtype(src->compute_dtype());
  auto params = src->parameters();
  if (!params.empty()) m->to(params.front().device(), params.front().scalar_type());
  at::NoGradGuard ng;
  auto from = src->ordered_parameters();
  auto to = m->ordered_parameters();
  for (size_t i = 0; i < to.size(); ++i) {
    to[i].second.copy_(from[i].second);
    to[i].second.set_requires_grad(false);
  }
  m->eval();
  return m;
}

// Hidden states (N, H) at the positions that predict each response token.
at::Tensor response_hidden(CausalLMImpl& model, const packed_batch& b) {
  auto h = b.segments.empty() ? model.hidden(b.ids, b.pos, b.mask)
                              : model.hidden(b.ids, b.pos, b.segments);  // (B, T, H)
  return h.reshape({-1, h.size(-1)}).index_select(0, b.src);            // (N, H)
}

// Logits (N, V) / T at the positions that predict each response token, in at least float32
// (a bf16 forward's logits are upcast before the temperature and the log-softmax, as the
// sampler upcasts them).
at::Tensor response_logits(CausalLMImpl& model, const packed_batch& b, double temperature) {
  auto logits = at_least_float(model.lm_logits(response_hidden(model, b)));  // (N, V)
  return temperature == 1.0 ? logits : logits / temperature;
}

// The LM head's weight (V, H): lm_head's, or the embedding's when tied (as lm_logits reads it).
const at::Tensor& lm_weight(CausalLMImpl& model) {
  return model.lm_head ? model.lm_head->weight : model.model->embed_tokens->weight;
}

// trainer.logprob_chunk_tokens: log-probs (N,) and, with `entropy`, the per-token entropy (N,)
// of the response tokens, the logits a chunk of tokens at a time (chunked_logprobs.hpp).
at::Tensor chunked_logprobs(CausalLMImpl& model, const packed_batch& b, double temperature,
                            int64_t chunk_tokens, at::Tensor* entropy) {
  auto out = chunked_token_logprobs(response_hidden(model, b), lm_weight(model), b.targets,
                                    temperature, chunk_tokens, entropy != nullptr);
  if (entropy) *entropy = out.entropy;
  return out.logp;
}

// rollout.batch_invariant: log softmax(logits / T)[target] (N,) by the sampler's own function,
// from logits (N, V) float32 without the temperature.
at::Tensor invariant_token_logprobs(const at::Tensor& logits, const packed_batch& b,
                                    double temperature) {
  return bi_token_logprobs(logits, b.targets,
                           at::full({logits.size(0)}, static_cast<float>(temperature)));
}

// rollout.batch_invariant without gradients: a forward through the batch-invariant kernels (the
// model's flag, no gradient), then the log-probs (N,).
at::Tensor invariant_logprobs(CausalLMImpl& model, const packed_batch& b, double temperature) {
  return invariant_token_logprobs(response_logits(model, b, 1.0), b, temperature);
}

// rollout.batch_invariant with gradients: the values of the batch-invariant forward (equal to
// the rollouts' bit for bit) and the gradient of the default one, which the invariant kernels
// lack. The backward runs the default forward again with gradients and back-propagates through
// it into the parameters' .grad, as checkpointed_layer does (model.cpp); the gradient is the
// default path's at the same weights, ~1e-7 relative from the exact one. `anchor` (a
// parameter) only makes autograd record the node. Outputs: log-probs (N,) and, without a
// gradient, the logits / T (N, V) for the entropy metric.
struct invariant_policy_logprobs : torch::autograd::Function<invariant_policy_logprobs> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                at::Tensor anchor, int64_t model, int64_t batch,
                                                double temperature) {
    (void)anchor;
    ctx->saved_data["model"] = model;
    ctx->saved_data["batch"] = batch;
    ctx->saved_data["temperature"] = temperature;
    auto& m = *reinterpret_cast<CausalLMImpl*>(model);
    const auto& b = *reinterpret_cast<const packed_batch*>(batch);
    // Function::forward runs without gradients: the model takes its invariant kernels.
    auto logits = response_logits(m, b, 1.0);
    auto logp = invariant_token_logprobs(logits, b, temperature);
    auto shown = temperature == 1.0 ? logits : logits / temperature;
    ctx->mark_non_differentiable({shown});
    return {logp, shown};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    auto& m = *reinterpret_cast<CausalLMImpl*>(ctx->saved_data["model"].toInt());
    const auto& b = *reinterpret_cast<const packed_batch*>(ctx->saved_data["batch"].toInt());
    const double temperature = ctx->saved_data["temperature"].toDouble();
    at::Tensor logp;
    {
      at::AutoGradMode with_grad(true);  // and so the default kernels
      logp = token_logprobs(response_logits(m, b, temperature), b.targets);
    }
    torch::autograd::backward({logp}, {grad[0]});
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// hi + lo += x by TwoSum (Knuth): hi + lo carries the running sum to ~2^-106, so the rounded
// total hi + lo does not depend on the order the terms came in. float32 gradients need no
// `lo`: with 24-bit mantissas they add up exactly in a float64 `hi` (unless their sizes differ
// by more than 2^29); float64 gradients would not.
void add_compensated(at::Tensor& hi, at::Tensor& lo, const at::Tensor& x) {
  auto s = hi + x;
  auto x_part = s - hi;
  lo.add_((hi - (s - x_part)) + (x - x_part));
  hi.copy_(s);
}

optimizer_options optimizer_options_of(const policy_trainer_params& p) {
  optimizer_options oo;
  oo.lr = p.lr;
  oo.weight_decay = p.weight_decay;
  oo.beta1 = p.beta1;
  oo.beta2 = p.beta2;
  oo.grad_clip = p.grad_clip;
  return oo;
}

}  // namespace

policy_trainer::~policy_trainer() = default;

void policy_trainer::join_data_parallel(dist_group& group, bool shard_optimizer) {
  if (micro_batches_ > 0)
    throw std::logic_error("join_data_parallel: micro-batches are already accumulated");
  dp_ = &group;
  {
    // Every rank starts from rank 0's weights, whatever seed built its model.
    at::NoGradGuard ng;
    std::vector<at::Tensor> weights;
    for (const auto* m : {&policy_, &old_, &ref_})
      if (*m)  // the frozen copies exist only when the loss or metrics read them
        for (auto& p : (*m)->parameters())
          weights.push_back(p.detach());
    group.broadcast(weights, 0);
  }
  if (shard_optimizer) {
    sharded_ =
        std::make_unique<sharded_optimizer>(policy_->parameters(), optimizer_options_of(p_), group);
    optimizer_.reset();
  }
  const auto params = policy_->parameters();
  reducer_ = std::make_unique<grad_reducer>(
      group, params, p_.deterministic_accumulation ? at::kDouble : params.front().scalar_type(),
      p_.grad_bucket_bytes);
}

at::Tensor policy_trainer::rank_sum(const std::vector<at::Tensor>& params, size_t i) {
  at::NoGradGuard ng;
  if (p_.deterministic_accumulation) {
    ensure_accumulators();
    if (!grad64_lo_.empty()) {
      grad64_[i].add_(grad64_lo_[i]);
      grad64_lo_[i].zero_();
    }
    return grad64_[i];
  }
  auto& g = params[i].mutable_grad();
  if (!g.defined()) g = at::zeros_like(params[i]);  // a rank without micro-batches
  return g;
}

void policy_trainer::close_gradients() {
  if (!reducer_ || reducer_->started()) return;
  // The float64 sums: a lone micro-batch's gradient is still in .grad.
  if (first_in_grad_ && p_.deterministic_accumulation) move_grads_to_accumulators();
  const auto params = policy_->parameters();
  reducer_->ready_rest([&](size_t i) { return rank_sum(params, i); });
}

void policy_trainer::backward_reducing(const at::Tensor& loss) {
  // .grad holds no float64-mode sum here (accumulate() moved it): each hook adds the incoming
  // gradient g to the accumulators as move_grads_to_accumulators() would, and hands the final
  // sum to the reducer. In .grad mode the final sum is .grad + g, computed here as autograd
  // computes it just after the hook. The hook of a leaf fires once per backward, with the
  // gradient from every use of the parameter summed (the tied embedding's two).
  const auto params = policy_->parameters();
  if (p_.deterministic_accumulation) ensure_accumulators();
  std::vector<std::pair<size_t, unsigned>> hooks;
  auto remove = [&] {
    for (const auto& [i, h] : hooks)
      params[i].remove_hook(h);
    hooks.clear();
  };
  for (size_t i = 0; i < params.size(); ++i) {
    if (!params[i].requires_grad()) continue;
    auto* p = &params[i];
    hooks.emplace_back(i, params[i].register_hook([this, i, p, &params](const at::Tensor& g) {
      at::NoGradGuard ng;
      if (!p_.deterministic_accumulation) {
        const auto& prior = p->grad();
        reducer_->ready(i, prior.defined() ? prior + g : g);
        return;
      }
      if (grad64_lo_.empty())
        grad64_[i].add_(g);  // float32 into float64: exact, with no float64 copy of g
      else
        add_compensated(grad64_[i], grad64_lo_[i], g);
      reducer_->ready(i, rank_sum(params, i));
    }));
  }
  try {
    loss.backward();
  } catch (...) {
    remove();
    throw;
  }
  remove();
  if (p_.deterministic_accumulation) {
    // Autograd also added each g to .grad: the accumulators already hold it.
    at::NoGradGuard ng;
    for (auto& p : params)
      if (p.grad().defined()) p.mutable_grad().zero_();
  }
  reducer_->ready_rest([&](size_t i) { return rank_sum(params, i); });  // those not reached
}

void policy_trainer::finish_reduction() {
  at::NoGradGuard ng;
  const auto params = policy_->parameters();
  reducer_->finish([&](size_t i, const at::Tensor& sum) {
    if (p_.deterministic_accumulation)
      grad64_[i].copy_(sum);
    else
      params[i].mutable_grad().copy_(sum);
  });
  first_in_grad_ = false;
}

int64_t policy_trainer::skipped_steps() const {
  return sharded_ ? sharded_->skipped_steps() : optimizer_->skipped_steps();
}

int64_t policy_trainer::optimizer_state_bytes() const {
  if (sharded_) return sharded_->state_bytes();
  int64_t bytes = 0;
  const auto n = policy_->parameters().size();
  for (size_t i = 0; i < n; ++i)
    if (auto st = optimizer_->moments(i))
      bytes += static_cast<int64_t>(st->exp_avg.nbytes() + st->exp_avg_sq.nbytes());
  return bytes;
}

void policy_trainer::zero_grad() {
  if (sharded_)
    sharded_->zero_grad();
  else
    optimizer_->zero_grad();
}

void policy_trainer::reduce_across_ranks() {
  at::NoGradGuard ng;
  // The gradient sums: the float64 accumulators (deterministic mode), else .grad. Summing the
  // ranks' float64 partial sums differs from one rank's sum of the same micro-batches only in
  // float64 rounding, which the cast to float32 at the step almost always hides. Already
  // started when a last micro-batch or the leader closed them.
  close_gradients();
  finish_reduction();

  // The mini-batch's sums and extremes, on the host: the loss statistics (stat_slot order)
  // and the trainer's own counts summed, the extremes maxed (a min as the max of its negation).
  const double inf = std::numeric_limits<double>::infinity();
  auto host = [](const at::Tensor& t) {
    return t.detach().to(at::kCPU, at::kDouble).reshape({-1});
  };
  std::vector<double> none(rl::st_count, 0.0);
  none[rl::st_weight_min] = inf;
  none[rl::st_weight_max] = none[rl::st_rc_weight_max] = -inf;
  auto st = stat_sums_.defined() ? host(stat_sums_) : at::tensor(none);
  auto mm = mismatch_sums_.defined() ? host(mismatch_sums_) : at::zeros({4}, at::kDouble);
  auto one = [&](const at::Tensor& t) { return t.defined() ? host(t)[0].item<double>() : 0.0; };
  const auto* s = st.data_ptr<double>();
  const auto* m = mm.data_ptr<double>();
  std::vector<double> sum{one(loss_dev_),
                          one(entropy_dev_),
                          double(tokens_),
                          double(samples_),
                          double(processed_),
                          double(real_),
                          double(micro_batches_),
                          m[0],
                          m[2],
                          m[3]};
  const size_t stats_at = sum.size();
  sum.insert(sum.end(), s, s + rl::st_count);  // min/max slots summed too, then replaced
  std::vector<double> max{-s[rl::st_weight_min],
                          s[rl::st_weight_max],
                          s[rl::st_rc_weight_max],
                          double(staleness_max_),
                          m[1],
                          prox_ms_};
  std::vector<at::Tensor> sums_t{at::tensor(sum)}, max_t{at::tensor(max)};
  dp_->allreduce(sums_t, reduce_kind::sum);
  dp_->allreduce(max_t, reduce_kind::max);
  const auto* S = sums_t[0].data_ptr<double>();
  const auto* X = max_t[0].data_ptr<double>();
  loss_dev_ = at::tensor(S[0]);
  entropy_dev_ = at::tensor(S[1]);
  std::vector<double> stats(S + stats_at, S + stats_at + rl::st_count);
  stats[rl::st_weight_min] = -X[0];
  stats[rl::st_weight_max] = X[1];
  stats[rl::st_rc_weight_max] = X[2];
  stat_sums_ = at::tensor(stats);
  tokens_ = static_cast<int64_t>(S[2]);
  samples_ = static_cast<int64_t>(S[3]);
  processed_ = static_cast<int64_t>(S[4]);
  real_ = static_cast<int64_t>(S[5]);
  micro_batches_ = static_cast<int64_t>(S[6]);
  mismatch_sums_ =
      S[9] > 0 ? at::tensor(std::vector<double>{S[7], X[4], S[8], S[9]}) : at::Tensor();
  staleness_max_ = static_cast<int64_t>(X[3]);
  prox_ms_ = X[5];
}

policy_trainer::policy_trainer(CausalLM policy, policy_trainer_params params)
    : policy_(std::move(policy)), p_(std::move(params)) {
  if (p_.precision == train_precision::float64) policy_->to(at::kDouble);
  if (p_.precision == train_precision::bf16) {
    // Mixed precision: float32 master weights, bf16 arithmetic.
    policy_->to(at::kFloat);
    policy_->set_compute_dtype(at::kBFloat16);
  }
  policy_->model->checkpoint_layers = p_.activation_checkpointing;
  // The frozen float32 (or float64) copies cost a model each: only those the loss or the
  // metrics read.
  if (needs_old()) old_ = frozen_copy(policy_);
  if (needs_ref()) ref_ = frozen_copy(policy_);
  for (auto* m : {&policy_, &old_, &ref_})
    if (*m) (*m)->batch_invariant = p_.batch_invariant;
  loss_cfg_.loss = p_.loss;
  loss_cfg_.clip = {p_.clip_eps_low, p_.clip_eps_high, p_.dual_clip_c};
  loss_cfg_.kl_coef = p_.kl_coef;
  loss_cfg_.imp_weight_cap = p_.imp_weight_cap;
  loss_cfg_.rc = p_.rollout_correction;
  loss_cfg_.agg = p_.loss_agg;
  loss_cfg_.host_stats = false;
  optimizer_ = std::make_unique<policy_optimizer>(policy_->parameters(), optimizer_options_of(p_));
  schedule_ = lr_schedule{p_.lr_schedule, p_.lr, p_.warmup_steps, p_.total_steps, p_.min_lr_ratio};
  // The float64 accumulators (deterministic_accumulation) come with the first step that has a
  // second micro-batch (ensure_accumulators): a step of one micro-batch never needs them.
  policy_->train();
}

bool policy_trainer::needs_old() const {
  // The old model's log-probs: the coupled loss's logp_old unless the rollout's stand in, the
  // decoupled loss's recomputed proximal policy. The mismatch metrics read it only then.
  return p_.loss == loss_kind::grpo ? !p_.use_rollout_logprobs
                                    : p_.prox_logp == prox_method::recompute;
}

bool policy_trainer::needs_ref() const { return p_.kl_coef > 0 || p_.compute_ref; }

void policy_trainer::ensure_accumulators() {
  if (!grad64_.empty()) return;
  at::NoGradGuard ng;
  for (auto& p : policy_->parameters()) {
    grad64_.push_back(at::zeros_like(p, at::kDouble));
    if (p.scalar_type() == at::kDouble) grad64_lo_.push_back(at::zeros_like(p, at::kDouble));
  }
}

void policy_trainer::begin_batch() {
  if (cmds_) cmds_->begin_batch();
  old_version_ = version_;
  if (!old_) return;
  at::NoGradGuard ng;
  auto from = policy_->ordered_parameters();
  auto to = old_->ordered_parameters();
  for (size_t i = 0; i < to.size(); ++i)
    to[i].second.copy_(from[i].second);
}

at::Tensor policy_trainer::packed_logprobs(CausalLMImpl& model, const packed_batch& b) {
  at::NoGradGuard ng;
  if (model.batch_invariant) return invariant_logprobs(model, b, p_.temperature);
  if (p_.logprob_chunk_tokens > 0)
    return chunked_logprobs(model, b, p_.temperature, p_.logprob_chunk_tokens, nullptr);
  return token_logprobs(response_logits(model, b, p_.temperature), b.targets);  // (N,)
}

at::Tensor policy_trainer::response_logprobs(CausalLMImpl& model,
                                             const std::vector<const scored_sample*>& samples) {
  auto device = model.parameters().front().device();
  auto b = pack_samples(samples, p_.shared_prompt_attention, device, p_.padding_free);
  // Pack order -> rows -> sample order.
  return to_rows(packed_logprobs(model, b), b).masked_select(response_mask(b));
}

void policy_trainer::accumulate(const std::vector<const scored_sample*>& micro, bool last) {
  if (reducer_ && reducer_->started())
    throw std::logic_error(
        "accumulate: this step's gradients are already being summed over the "
        "ranks (a micro-batch after the last one)");
  if (cmds_ && cmds_->route(micro, last) != 0) {  // another rank accumulates it
    if (last) close_gradients();
    return;
  }
  auto device = policy_->parameters().front().device();
  auto b = pack_samples(micro, p_.shared_prompt_attention, device, p_.padding_free);
  const auto N = b.targets.size(0);
  if (N == 0 || b.loss_tokens == 0)
    throw std::invalid_argument("micro-batch has no response tokens of the model");

  // Per-token generator data as (M, max_response) rows, row m = micro[m]. The model's
  // log-probs come out in pack order and are scattered into the same rows by to_rows().
  const int64_t M = b.samples, L = std::max<int64_t>(1, b.max_response);
  // Advantages stay double until cast to the working dtype: a float64 trainer must not see a
  // float32-rounded copy (1e-8 relative).
  std::vector<float> behav(M * L, 0.f);
  std::vector<double> adv(M * L, 0.0);
  std::vector<int64_t> stale(M * L, 0);
  for (int64_t m = 0; m < M; ++m) {
    const auto* s = micro[m];
    for (size_t j = 0; j < s->response.size(); ++j) {
      behav[m * L + j] = s->logprobs[j];
      adv[m * L + j] = s->advantage;
      const int64_t d = version_ - s->versions[j];
      if (d < 0)
        throw std::invalid_argument("sample " + std::to_string(s->uid) +
                                    " has a token of version " + std::to_string(s->versions[j]) +
                                    ", newer than the policy (" + std::to_string(version_) + ")");
      stale[m * L + j] = d;
      staleness_max_ = std::max(staleness_max_, d);
    }
  }
  auto rows = [&](const at::Tensor& flat) { return to_rows(flat, b); };
  auto grid = [&](const at::Tensor& t) { return t.view({M, L}).to(device); };
  // The environment's tokens of an episode are context, never trained on: out of the loss,
  // its statistics and the token count that normalises it.
  auto mask = loss_mask(b);
  const auto dtype = policy_->parameters().front().scalar_type();
  auto behav_t = grid(at::tensor(behav)).to(dtype);
  auto adv_t = grid(at::tensor(adv)).to(dtype);

  at::Tensor logp_packed, entropy;  // (N,) with grad, (N,) without
  if (p_.batch_invariant) {
    auto out = invariant_policy_logprobs::apply(policy_->parameters().front(),
                                                reinterpret_cast<int64_t>(policy_.get()),
                                                reinterpret_cast<int64_t>(&b), p_.temperature);
    logp_packed = out[0];
    at::NoGradGuard ng;
    entropy = rl::entropy_from_logits(out[1].detach());
  } else if (p_.logprob_chunk_tokens > 0) {
    logp_packed = chunked_logprobs(*policy_, b, p_.temperature, p_.logprob_chunk_tokens, &entropy);
  } else {
    auto logits = response_logits(*policy_, b, p_.temperature);  // (N, V)
    logp_packed = token_logprobs(logits, b.targets);
    at::NoGradGuard ng;
    entropy = rl::entropy_from_logits(logits.detach());
  }
  auto logp = rows(logp_packed);
  {
    at::NoGradGuard ng;  // summed on the device; step() reads it
    add_device_sum(entropy_dev_, entropy.mul(b.trained).sum());
  }

  rl::loss_inputs in;
  in.logp = logp;
  in.advantages = adv_t;
  in.mask = mask;
  in.norm = 1.0;  // raw sums; step() divides by the mini-batch total
  in.logp_behav = behav_t;
  auto stale_t = grid(at::tensor(stale));
  at::Tensor old_logp;  // the old model's log-probs, when this micro-batch needs them
  auto t_prox = std::chrono::steady_clock::now();
  if (p_.loss == loss_kind::grpo) {
    if (!p_.use_rollout_logprobs) old_logp = rows(packed_logprobs(*old_, b));
    in.logp_old = p_.use_rollout_logprobs ? behav_t : old_logp;
  } else if (p_.prox_logp == prox_method::recompute) {
    in.logp_prox = old_logp = rows(packed_logprobs(*old_, b));
  } else {
    in.logp_prox = rl::loglinear_prox(behav_t, logp, stale_t);
  }
  prox_ms_ += ms_since(t_prox);
  // The rollout/trainer mismatch, against whichever trained model holds the tokens' weights:
  // the old model (version old_version_) when it ran, else the policy (version_).
  if (old_logp.defined())
    add_mismatch(old_logp, behav_t, stale_t.eq(version_ - old_version_).logical_and(mask));
  else
    add_mismatch(logp.detach(), behav_t, stale_t.eq(0).logical_and(mask));
  if (p_.kl_coef > 0 || p_.compute_ref) in.logp_ref = rows(packed_logprobs(*ref_, b));

  auto out = rl::policy_loss(in, loss_cfg_);
  // The first micro-batch's gradient stays in .grad: with one micro-batch per step (a token
  // budget that holds the whole step) it never needs the float64 buffers. A second one first
  // moves it there, so backward() below writes into zeroed .grad as it always did.
  if (first_in_grad_) move_grads_to_accumulators();
  const bool overlap = last && reducer_ && p_.overlap_grad_reduce;
  if (overlap)
    backward_reducing(out.loss);
  else
    out.loss.backward();
  if (p_.deterministic_accumulation && !overlap) {
    if (micro_batches_ == 0)
      first_in_grad_ = true;
    else
      move_grads_to_accumulators();
  }

  {
    // No host read per micro-batch: the loss and the statistics stay on the device until
    // step() (a read would stall the launch queue once per micro-batch).
    at::NoGradGuard ng;
    add_device_sum(loss_dev_, out.loss.detach());
    stat_sums_ = rl::combine_stats(stat_sums_, out.stat_sums);
  }
  tokens_ += b.loss_tokens;
  samples_ += b.samples;
  processed_ += b.tokens_processed;
  real_ += b.tokens_real;
  ++micro_batches_;
}

void policy_trainer::add_mismatch(const at::Tensor& train_logp, const at::Tensor& rollout_logp,
                                  const at::Tensor& same_weights) {
  at::NoGradGuard ng;
  auto keep = same_weights.to(at::kDouble);
  auto x = (train_logp.to(at::kDouble) - rollout_logp.to(at::kDouble)) * keep;  // (M, L)
  // k3 of KL(rollout || train) with the rollout's samples: r = pi_train / pi_rollout,
  // (r - 1) - log r, exactly 0 where the two agree.
  auto k3 = (x.exp() - 1 - x) * keep;
  // Summed on the device, without a host read: step() reads the four numbers once.
  auto v = at::stack({x.abs().sum(), x.abs().max(), k3.sum(), keep.sum()});  // (4,)
  if (!mismatch_sums_.defined()) {
    mismatch_sums_ = v;
    return;
  }
  auto sums = mismatch_sums_ + v;
  sums[1] = at::maximum(mismatch_sums_[1], v[1]);
  mismatch_sums_ = sums;
}

void policy_trainer::move_grads_to_accumulators() {
  ensure_accumulators();
  at::NoGradGuard ng;
  auto params = policy_->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    auto& g = params[i].mutable_grad();
    if (!g.defined()) continue;
    if (grad64_lo_.empty())
      grad64_[i].add_(g);  // float32 into float64: exact, with no float64 copy of g
    else
      add_compensated(grad64_[i], grad64_lo_[i], g);
    g.zero_();
  }
  first_in_grad_ = false;
}

at::Tensor policy_trainer::accumulated(size_t i) const {
  return grad64_lo_.empty() ? grad64_[i] : grad64_[i] + grad64_lo_[i];
}

std::vector<at::Tensor> policy_trainer::pending_gradient() const {
  const double norm =
      p_.loss_agg == loss_aggregation::token_mean ? double(tokens_) : double(samples_);
  std::vector<at::Tensor> out;
  auto params = policy_->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    if (!grad64_.empty() && !first_in_grad_)  // else the sum is still in .grad
      out.push_back(accumulated(i) / norm);
    else
      out.push_back(params[i].grad().defined() ? params[i].grad().to(at::kDouble) / norm
                                               : at::zeros_like(params[i], at::kDouble));
  }
  return out;
}

void policy_trainer::set_lr(double lr) {
  if (cmds_) cmds_->set_lr(lr);
  p_.lr = lr;
  schedule_ = lr_schedule{p_.lr_schedule, p_.lr, p_.warmup_steps, p_.total_steps, p_.min_lr_ratio};
}

update_stats policy_trainer::step() {
  if (!cmds_) return step_here();
  cmds_->step();
  try {
    return step_here();
  } catch (const dist_error& e) {
    throw dist_error(e.what() + cmds_->diagnosis());  // which rank is gone, when known
  }
}

update_stats policy_trainer::step_here() {
  update_stats u;
  if (dp_) reduce_across_ranks();  // every rank now holds the whole mini-batch's sums
  const double norm =
      p_.loss_agg == loss_aggregation::token_mean ? double(tokens_) : double(samples_);
  if (norm <= 0) throw std::invalid_argument("optimizer step with no accumulated tokens");
  if (first_in_grad_) {
    // One micro-batch: its gradient is the sum. Dividing in the gradients' own dtype rounds as
    // the float64 path does (a float32 quotient computed in float64 and rounded to float32 is
    // the correctly rounded float32 quotient), in one multi-tensor operation.
    at::NoGradGuard ng;
    std::vector<at::Tensor> grads;
    for (auto& p : policy_->parameters())
      if (p.grad().defined()) grads.push_back(p.grad());
    at::_foreach_div_(grads, at::Scalar(norm));
    first_in_grad_ = false;
  } else {
    at::NoGradGuard ng;
    auto params = policy_->parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      auto& g = params[i].mutable_grad();
      if (!grad64_.empty()) {
        // In the parameters' working dtype: float64 stays float64. In place: the same values
        // as (hi + lo) / norm, without a float64 temporary the size of the parameter.
        auto& sum = grad64_[i];
        if (!grad64_lo_.empty()) {
          sum.add_(grad64_lo_[i]);
          grad64_lo_[i].zero_();
        }
        sum.div_(norm);
        if (g.defined())
          g.copy_(sum);
        else
          g = sum.to(params[i].scalar_type(), /*non_blocking=*/false, /*copy=*/true);
        sum.zero_();
      } else if (g.defined()) {
        g.div_(norm);
      }
    }
  }
  read_minibatch_sums();
  u.loss = loss_sum_ / norm;
  u.lr = schedule_.at(steps_taken_);
  auto outcome = sharded_ ? sharded_->step(u.lr, std::isfinite(u.loss))
                          : optimizer_->step(u.lr, std::isfinite(u.loss));
  // The next mini-batch accumulates from zero: backward() adds into .grad, which still holds
  // this step's normalised gradient (the optimizer only clears it on a skipped step).
  zero_grad();
  ++steps_taken_;
  if (!outcome.skipped) ++version_;
  u.grad_norm = outcome.grad_norm;
  u.skipped = outcome.skipped;
  const auto& st = loss_st_;
  const double kept = st.kept_tokens;
  u.kl = tokens_ ? st.kl_sum / tokens_ : 0;
  u.entropy = tokens_ ? entropy_sum_ / tokens_ : 0;
  u.clip_frac = kept ? st.clipped / kept : 0;
  u.clip_frac_lower = kept ? st.dual_clipped / kept : 0;
  u.imp_weight_min = st.weight_min;
  u.imp_weight_max = st.weight_max;
  u.imp_weight_mean = tokens_ ? st.weight_sum / tokens_ : 0;
  u.masked_tokens = tokens_ - static_cast<int64_t>(kept);
  u.rc_weight_mean = kept ? st.rc_weight_sum / kept : 0;
  u.rc_weight_max = st.rc_weight_max;
  u.rc_truncated_frac = tokens_ ? st.rc_truncated / tokens_ : 0;
  u.rc_rejected_frac = tokens_ ? st.rc_rejected / tokens_ : 0;
  u.rc_kl_k3 = tokens_ ? st.rc_kl_sum / tokens_ : 0;
  u.tokens_trained = tokens_;
  u.samples_trained = samples_;
  u.tokens_processed = processed_;
  u.tokens_real = real_;
  u.micro_batches = micro_batches_;
  u.staleness_max = staleness_max_;
  u.prox_time_ms = prox_ms_;
  if (mismatch_sums_.defined()) {
    const auto m = mismatch_sums_.cpu();
    const auto* d = m.data_ptr<double>();
    u.mismatch_tokens = static_cast<int64_t>(d[3]);
    if (u.mismatch_tokens > 0) {
      u.mismatch_abs_mean = d[0] / d[3];
      u.mismatch_abs_max = d[1];
      u.mismatch_kl_k3 = d[2] / d[3];
    }
  }
  clear_minibatch_sums();
  return u;
}

void policy_trainer::add_device_sum(at::Tensor& acc, const at::Tensor& x) {
  auto v = x.to(at::kDouble);
  acc = acc.defined() ? acc + v : v;
}

void policy_trainer::read_minibatch_sums() {
  // One host read for the whole mini-batch.
  auto zero = at::zeros({}, at::kDouble);
  auto dev = [&](const at::Tensor& t) {
    return t.defined() ? t.reshape({1}).cpu() : zero.reshape({1});
  };
  auto host = at::cat({dev(loss_dev_), dev(entropy_dev_)});
  loss_sum_ = host[0].item<double>();
  entropy_sum_ = host[1].item<double>();
  loss_st_ = stat_sums_.defined() ? rl::read_stats(stat_sums_) : rl::loss_stats{};
}

void policy_trainer::clear_minibatch_sums() {
  loss_sum_ = entropy_sum_ = 0;
  loss_st_ = rl::loss_stats{};
  tokens_ = samples_ = processed_ = real_ = micro_batches_ = 0;
  staleness_max_ = 0;
  prox_ms_ = 0;
  mismatch_sums_ = at::Tensor();
  loss_dev_ = entropy_dev_ = stat_sums_ = at::Tensor();
}

}  // namespace asyncrl

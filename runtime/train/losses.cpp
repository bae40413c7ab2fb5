#include "runtime/train/losses.hpp"

#include "runtime/train/rollout_correction.hpp"

#include <limits>

#include <ATen/core/grad_mode.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace asyncrl::rl {

namespace {

std::string shape_of(const at::Tensor& t) {
  std::string s = "(";
  for (int64_t i = 0; i < t.dim(); ++i)
    s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + ")";
}

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument(what);
}

void same_shape(const at::Tensor& ref, const at::Tensor& t, const char* ref_name,
                const char* name) {
  require(t.defined(), std::string(name) + " is missing");
  require(t.sizes() == ref.sizes(), std::string(name) + " has shape " + shape_of(t) + " but " +
                                        ref_name + " has " + shape_of(ref));
}

}  // namespace

at::Tensor group_advantages(const at::Tensor& rewards, bool divide_by_std, double eps) {
  require(rewards.defined() && rewards.dim() == 2,
          "rewards must be (num_groups, G), got " +
              (rewards.defined() ? shape_of(rewards) : std::string("undefined")));
  require(rewards.numel() > 0, "rewards is empty");
  auto r = rewards.to(at::kDouble);
  const auto G = r.size(1);
  at::Tensor mean, std;
  if (G == 1) {
    mean = at::zeros({r.size(0), 1}, r.options());
    std = at::ones({r.size(0), 1}, r.options());
  } else {
    mean = r.mean(1, /*keepdim=*/true);
    std = r.std(1, /*unbiased=*/true, /*keepdim=*/true);
  }
  auto centred = r - mean;
  auto a = divide_by_std ? centred / (std + eps) : centred;
  return a.to(rewards.scalar_type() == at::kDouble ? at::kDouble : at::kFloat);
}

at::Tensor zero_variance_groups(const at::Tensor& rewards) {
  require(rewards.defined() && rewards.dim() == 2, "rewards must be (num_groups, G)");
  return (rewards.amax(1) == rewards.amin(1));
}

surrogate clipped_surrogate(const at::Tensor& log_ratio, const at::Tensor& adv,
                            const clip_config& clip) {
  same_shape(log_ratio, adv, "log_ratio", "advantages");
  auto ratio = at::exp(at::clamp(log_ratio, -20.0, 20.0));
  auto l1 = -adv * ratio;
  auto l2 = -adv * at::clamp(ratio, 1.0 - clip.eps_low, 1.0 + clip.eps_high);
  auto loss = at::maximum(l1, l2);
  // Counted apart from the dual clip, as verl does: a dual-clipped token (A < 0, r > c) has
  // r A < clip(r) A, so it is not "clipped" here and lands in dual_clipped only.
  auto clipped = l2 > l1;
  auto dual_clipped = at::zeros_like(clipped);
  if (clip.dual_c > 0) {
    auto l3 = -adv * clip.dual_c;
    auto neg = adv < 0;
    dual_clipped = neg.logical_and(l3 < loss);
    loss = at::where(neg, at::minimum(loss, l3), loss);
  }
  return {loss, ratio, clipped, dual_clipped};
}

at::Tensor kl_k3(const at::Tensor& logp, const at::Tensor& logp_ref) {
  same_shape(logp, logp_ref, "logp", "logp_ref");
  auto x = at::clamp(logp_ref - logp, -20.0, 20.0);
  return at::clamp(at::exp(x) - x - 1.0, -10.0, 10.0);
}

at::Tensor loglinear_alpha(const at::Tensor& staleness, at::ScalarType dtype) {
  auto d = staleness.to(dtype);
  require(!(d < 0).any().item<bool>(), "staleness must be >= 0 (a token newer than the policy?)");
  return at::where(d > 0, 1.0 / d.clamp_min(1.0), at::zeros_like(d));
}

at::Tensor loglinear_prox(const at::Tensor& logp_behav, const at::Tensor& logp,
                          const at::Tensor& staleness) {
  same_shape(logp, logp_behav, "logp", "logp_behav");
  same_shape(logp, staleness, "logp", "staleness");
  auto alpha = loglinear_alpha(staleness, logp.scalar_type());
  return alpha * logp_behav + (1.0 - alpha) * logp.detach();
}

decoupled_terms decoupled_surrogate(const at::Tensor& logp, const at::Tensor& logp_prox,
                                    const at::Tensor& logp_behav, const at::Tensor& adv,
                                    const clip_config& clip, double cap) {
  same_shape(logp, logp_prox, "logp", "logp_prox");
  same_shape(logp, logp_behav, "logp", "logp_behav");
  same_shape(logp, adv, "logp", "advantages");
  auto w = at::exp(at::clamp(logp_prox.detach() - logp_behav, -20.0, 20.0));
  auto kept = cap > 0 ? (w <= cap) : at::ones_like(w, w.options().dtype(at::kBool));
  auto s = clipped_surrogate(logp - logp_prox.detach(), adv, clip);
  auto loss = s.loss * (w * kept);
  return {loss, w, kept, s.clipped, s.dual_clipped, s.ratio};
}

at::Tensor entropy_from_logits(const at::Tensor& logits) {
  auto logp = at::log_softmax(logits, -1);
  return -(logp.exp() * logp).sum(-1);
}

at::Tensor aggregate(const at::Tensor& x, const at::Tensor& mask, loss_aggregation mode,
                     double norm) {
  same_shape(x, mask, "x", "mask");
  require(norm > 0, "the aggregation norm (batch token or sequence count) must be > 0");
  auto m = mask.to(x.scalar_type());
  if (mode == loss_aggregation::token_mean) return (x * m).sum() / norm;
  require(x.dim() == 2, "seq-mean needs (B, T) tensors, got " + shape_of(x));
  auto len = m.sum(1);
  auto row = (x * m).sum(1) / len.clamp_min(1.0);
  return row.sum() / norm;
}

loss_outputs policy_loss(const loss_inputs& in, const loss_config& cfg) {
  require(in.logp.defined(), "logp is missing");
  require(in.logp.numel() > 0, "empty batch: logp has no elements");
  same_shape(in.logp, in.mask, "logp", "mask");
  same_shape(in.logp, in.advantages, "logp", "advantages");
  auto mask = in.mask.to(at::kBool);
  const bool decoupled = cfg.loss == loss_kind::decoupled;
  // The policy the trainer holds for the rollout's tokens: the old one (coupled) or the proximal
  // one (decoupled). The rollout correction weighs and rejects on its ratio to the rollout's.
  const auto& logp_train = decoupled ? in.logp_prox : in.logp_old;
  same_shape(in.logp, logp_train, "logp", decoupled ? "logp_prox" : "logp_old");
  if (decoupled || cfg.rc.active()) same_shape(in.logp, in.logp_behav, "logp", "logp_behav");
  loss_outputs out;
  auto s = clipped_surrogate(in.logp - logp_train.detach(), in.advantages, cfg.clip);
  // Per token: the raw ratio (metrics), the weight applied, the tokens kept.
  at::Tensor weight, applied, kept = mask;
  at::Tensor log_ratio;  // clamped logp_train - logp_behav, for the weight and rc_kl_k3
  correction rc;         // only computed when a correction is on: no ops otherwise
  if (in.logp_behav.defined()) {
    log_ratio = at::clamp(logp_train.detach() - in.logp_behav, -20.0, 20.0);
    weight = at::exp(log_ratio);
    if (cfg.rc.active()) {
      // (M, L) rows, one per response; a 1-D batch is one response.
      auto as_rows = [](const at::Tensor& t) { return t.dim() == 2 ? t : t.reshape({1, -1}); };
      rc = rollout_correction(as_rows(log_ratio), as_rows(mask), cfg.rc);
      for (auto* t : {&rc.log_ratio, &rc.raw, &rc.weight, &rc.truncated, &rc.keep})
        *t = t->view(in.logp.sizes());
      kept = rc.keep;
    }
  } else {
    weight = at::ones_like(in.logp).detach();
  }
  if (decoupled) {
    // AReaL's behaviour weight, truncated when rollout_correction.is asks; the cap masks on
    // the token's own weight whatever the IS level.
    applied = cfg.rc.active() ? rc.weight : weight;
    if (cfg.imp_weight_cap > 0) kept = kept.logical_and(weight <= cfg.imp_weight_cap);
    out.pg_per_token = s.loss * (applied * kept);
  } else if (cfg.rc.active()) {
    applied = cfg.rc.is == rc_is_level::none ? at::ones_like(weight) : rc.weight;
    out.pg_per_token = s.loss * (applied * kept);
  } else {
    out.pg_per_token = s.loss;  // no weight (the statistics below count it as 1)
  }
  auto per_token = out.pg_per_token;
  if (in.logp_ref.defined()) {
    out.kl_per_token = kl_k3(in.logp, in.logp_ref.detach());
    if (cfg.kl_coef != 0) per_token = per_token + cfg.kl_coef * out.kl_per_token;
  }
  out.loss = aggregate(per_token, mask, cfg.agg, in.norm);

  at::NoGradGuard no_grad;
  // All on the device, then (host_stats) one read: no host synchronisation per statistic.
  const auto f64 = [](const at::Tensor& t) { return t.to(at::kDouble); };
  const double inf = std::numeric_limits<double>::infinity();
  auto w = f64(weight);
  auto zero = at::zeros({}, w.options());
  auto kl = out.kl_per_token.defined() ? f64(out.kl_per_token.detach() * mask).sum() : zero;
  at::Tensor truncated = zero, rejected = zero, rc_kl = zero;
  if (log_ratio.defined())  // k3 of KL(pi_rollout || pi_train): exp(l) - 1 - l >= 0
    rc_kl = at::where(mask, w - 1.0 - f64(log_ratio), 0.0).sum();
  if (rc.keep.defined()) {
    truncated = f64(rc.truncated.sum());
    rejected = f64(mask.logical_and(rc.keep.logical_not()).sum());
  }
  std::vector<at::Tensor> slots(st_count);
  slots[st_tokens] = f64(mask.sum());
  slots[st_kept] = f64(kept.sum());
  slots[st_clipped] = f64(s.clipped.logical_and(kept).sum());
  slots[st_dual_clipped] = f64(s.dual_clipped.logical_and(kept).sum());
  slots[st_kl] = kl;
  slots[st_weight_min] = at::where(mask, w, inf).min();
  slots[st_weight_max] = at::where(mask, w, -inf).max();
  slots[st_weight_sum] = at::where(mask, w, 0.0).sum();
  if (!cfg.rc.active() && (!decoupled || cfg.imp_weight_cap <= 0)) {
    // The weight applied is 1 (coupled) or w itself on every masked token (decoupled, nothing
    // masked): the sums above already hold it, and the loss costs no more ops than before.
    slots[st_rc_weight_sum] = decoupled ? slots[st_weight_sum] : slots[st_kept];
    slots[st_rc_weight_max] = decoupled ? slots[st_weight_max] : at::ones({}, w.options());
  } else {
    auto a = f64(applied);
    slots[st_rc_weight_sum] = at::where(kept, a, 0.0).sum();
    slots[st_rc_weight_max] = at::where(kept, a, -inf).max();
  }
  slots[st_rc_truncated] = truncated;
  slots[st_rc_rejected] = rejected;
  slots[st_rc_kl] = rc_kl;
  out.stat_sums = at::stack(slots);  // (st_count,)
  if (cfg.host_stats) out.stats = read_stats(out.stat_sums);
  return out;
}

loss_stats read_stats(const at::Tensor& stat_sums) {
  require(stat_sums.numel() == st_count,
          "stat_sums must have " + std::to_string(int64_t{st_count}) + " elements");
  const auto h = stat_sums.to(at::kCPU, at::kDouble).contiguous();
  const double* d = h.data_ptr<double>();
  loss_stats st;
  st.tokens = d[st_tokens];
  st.kept_tokens = d[st_kept];
  st.clipped = d[st_clipped];
  st.dual_clipped = d[st_dual_clipped];
  st.kl_sum = d[st_kl];
  if (st.tokens > 0) {
    st.weight_min = d[st_weight_min];
    st.weight_max = d[st_weight_max];
    st.weight_sum = d[st_weight_sum];
  }
  if (st.kept_tokens > 0) {
    st.rc_weight_sum = d[st_rc_weight_sum];
    st.rc_weight_max = d[st_rc_weight_max];
  }
  st.rc_truncated = d[st_rc_truncated];
  st.rc_rejected = d[st_rc_rejected];
  st.rc_kl_sum = d[st_rc_kl];
  return st;
}

at::Tensor combine_stats(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined()) return b;
  auto out = a + b;
  out[st_weight_min] = at::minimum(a[st_weight_min], b[st_weight_min]);
  out[st_weight_max] = at::maximum(a[st_weight_max], b[st_weight_max]);
  out[st_rc_weight_max] = at::maximum(a[st_rc_weight_max], b[st_rc_weight_max]);
  return out;
}

}  // namespace asyncrl::rl

#include "runtime/train/sharded_optimizer.hpp"

#include <ATen/ATen.h>

#include <stdexcept>

#include "runtime/dist/dist_group.hpp"

namespace asyncrl {

namespace {

at::Tensor segment_of(const at::Tensor& t, const shard_segment& s) {
  return t.view({-1}).narrow(0, s.begin, s.length);
}

}  // namespace

sharded_optimizer::sharded_optimizer(std::vector<torch::Tensor> params, optimizer_options opt,
                                     dist_group& group)
    : params_(std::move(params)), opt_(opt), group_(group) {
  std::vector<int64_t> numels;
  for (auto& p : params_) {
    if (!p.is_contiguous())
      throw std::invalid_argument("sharded optimizer: parameters must be contiguous");
    numels.push_back(p.numel());
  }
  layout_ = make_shard_layout(numels, group_.world());
  at::NoGradGuard ng;
  for (const auto& s : layout_.ranks[group_.rank()])
    views_.push_back(segment_of(params_[s.param].detach(), s));  // shares the weights' storage
  shard_ = std::make_unique<policy_optimizer>(views_, opt_);
}

void sharded_optimizer::zero_grad() {
  for (auto& p : params_)
    if (p.grad().defined()) p.mutable_grad().zero_();
  shard_->zero_grad();
}

step_outcome sharded_optimizer::step(double lr, bool loss_finite) {
  at::NoGradGuard ng;
  std::vector<torch::Tensor> grads;
  for (auto& p : params_)
    if (p.grad().defined()) grads.push_back(p.grad());
  const double norm = global_grad_norm(grads);
  const auto& mine = layout_.ranks[group_.rank()];
  for (size_t k = 0; k < mine.size(); ++k) {
    const auto& g = params_[mine[k].param].grad();
    views_[k].mutable_grad() = g.defined() ? segment_of(g, mine[k]) : at::zeros_like(views_[k]);
  }
  auto out = shard_->step(lr, loss_finite, norm);
  if (out.skipped) {
    zero_grad();  // every rank skips: the same norm and loss everywhere
    return out;
  }
  // Every rank's updated shard to the others: one broadcast per rank from a shard-sized buffer,
  // so the weights' gather never holds more than one shard beside them (an all-gather would
  // hold all W).
  for (int r = 0; r < group_.world(); ++r) {
    const int64_t n = std::max<int64_t>(1, layout_.elements[r]);
    std::vector<at::Tensor> buf{at::empty({n}, params_.front().options())};
    int64_t off = 0;
    if (r == group_.rank())
      for (auto& v : views_) {
        buf[0].narrow(0, off, v.numel()).copy_(v.reshape({-1}));
        off += v.numel();
      }
    group_.broadcast(buf, r);
    if (r == group_.rank()) continue;
    off = 0;
    for (const auto& s : layout_.ranks[r]) {
      segment_of(params_[s.param].detach(), s).copy_(buf[0].narrow(0, off, s.length));
      off += s.length;
    }
  }
  return out;
}

std::unique_ptr<policy_optimizer> sharded_optimizer::whole_scratch(
    std::vector<torch::Tensor>& holders) const {
  holders.clear();
  for (auto& p : params_)
    holders.push_back(at::zeros_like(p));
  return std::make_unique<policy_optimizer>(holders, opt_);
}

void sharded_optimizer::save(torch::serialize::OutputArchive& ar) const {
  at::NoGradGuard ng;
  // This rank's moments, flat and padded; the step count is the same for every segment (all
  // were stepped together), 0 before the first step.
  const int64_t width = std::max<int64_t>(1, layout_.max_elements());
  auto opts = params_.front().options();
  auto m = at::zeros({width}, opts), v = at::zeros({width}, opts);
  int64_t step = 0, off = 0;
  for (size_t k = 0; k < views_.size(); ++k) {
    const auto n = views_[k].numel();
    if (auto st = shard_->moments(k)) {
      step = st->step;
      m.narrow(0, off, n).copy_(st->exp_avg.reshape({-1}));
      v.narrow(0, off, n).copy_(st->exp_avg_sq.reshape({-1}));
    }
    off += n;
  }
  auto steps = at::full({1}, static_cast<double>(step), opts.dtype(at::kDouble));
  auto all_m = group_.allgather(m), all_v = group_.allgather(v);
  auto all_steps = group_.allgather(steps);
  std::vector<torch::Tensor> holders;
  auto whole = whole_scratch(holders);
  std::vector<at::Tensor> em, ev;
  for (auto& p : params_) {
    em.push_back(at::zeros_like(p));
    ev.push_back(at::zeros_like(p));
  }
  std::vector<int64_t> param_step(params_.size(), 0);
  for (int r = 0; r < group_.world(); ++r) {
    int64_t o = 0;
    const auto s_r = static_cast<int64_t>(all_steps[r].item<double>());
    for (const auto& s : layout_.ranks[r]) {
      segment_of(em[s.param], s).copy_(all_m[r].narrow(0, o, s.length));
      segment_of(ev[s.param], s).copy_(all_v[r].narrow(0, o, s.length));
      param_step[s.param] = s_r;
      o += s.length;
    }
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (param_step[i] > 0) whole->set_moments(i, {param_step[i], em[i], ev[i]});
  whole->set_counters(shard_->steps(), shard_->skipped_steps());
  whole->save(ar);
}

void sharded_optimizer::load(torch::serialize::InputArchive& ar) {
  std::vector<torch::Tensor> holders;
  auto whole = whole_scratch(holders);
  whole->load(ar);  // checks every moment against the parameters' shapes before we use it
  at::NoGradGuard ng;
  const auto& mine = layout_.ranks[group_.rank()];
  auto fresh = std::make_unique<policy_optimizer>(views_, opt_);
  for (size_t k = 0; k < mine.size(); ++k)
    if (auto st = whole->moments(mine[k].param))
      fresh->set_moments(k, {st->step, segment_of(st->exp_avg, mine[k]).clone(),
                             segment_of(st->exp_avg_sq, mine[k]).clone()});
  fresh->set_counters(whole->steps(), whole->skipped_steps());
  shard_ = std::move(fresh);
}

int64_t sharded_optimizer::state_bytes() const {
  int64_t bytes = 0;
  for (size_t k = 0; k < views_.size(); ++k)
    if (auto st = shard_->moments(k))
      bytes += static_cast<int64_t>(st->exp_avg.nbytes() + st->exp_avg_sq.nbytes());
  return bytes;
}

}  // namespace asyncrl

#include "runtime/model/chunked_logprobs.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include <torch/csrc/autograd/custom_function.h>

#include "runtime/model/precision.hpp"

namespace asyncrl {

namespace {

// Rows [s, s + n) of the logits / T in at least float32: (n, V). The same operations as
// CausalLMImpl::lm_logits (a 2-D matmul with the weight in h's dtype, tied or untied) and the
// trainer's upcast and temperature, so one chunk gives the plain path's bits.
at::Tensor chunk_logits(const at::Tensor& h, const at::Tensor& wc, double temperature, int64_t s,
                        int64_t n) {
  auto z = at_least_float(at::matmul(h.narrow(0, s, n), wc.t()));
  return temperature == 1.0 ? z : z / temperature;
}

// One chunk's log-probs of its targets (n,), and with `lse` / `entropy` set, the logsumexp
// (n,) for the backward and the entropy (n,). At most two (n, V) float tensors live at once.
at::Tensor chunk_forward(const at::Tensor& h, const at::Tensor& wc, const at::Tensor& targets,
                         double temperature, int64_t s, int64_t n, at::Tensor* lse,
                         at::Tensor* entropy) {
  auto z = chunk_logits(h, wc, temperature, s, n);  // (n, V)
  if (lse) *lse = at::logsumexp(z, -1);
  // log_softmax then gather, as token_logprobs computes it (same bits for the same rows).
  auto out = at::log_softmax(z, -1);  // (n, V)
  auto logp = out.gather(-1, targets.narrow(0, s, n).unsqueeze(-1)).squeeze(-1);
  if (entropy) {
    // -(exp(logp) * logp).sum(-1) as rl::entropy_from_logits, in z's memory.
    at::exp_out(z, out);
    z.mul_(out);
    *entropy = -z.sum(-1);
  }
  return logp;
}

void check_inputs(const at::Tensor& h, const at::Tensor& w, const at::Tensor& targets,
                  int64_t chunk_tokens) {
  auto fail = [](const std::string& what) {
    throw std::invalid_argument("chunked_token_logprobs: " + what);
  };
  if (chunk_tokens <= 0) fail("chunk_tokens must be > 0, got " + std::to_string(chunk_tokens));
  if (h.dim() != 2 || w.dim() != 2 || targets.dim() != 1)
    fail("expected h (N, H), weight (V, H) and targets (N,)");
  if (h.size(1) != w.size(1)) fail("h and weight disagree on the hidden size");
  if (targets.size(0) != h.size(0)) fail("h and targets disagree on the token count");
}

struct chunked_logprobs_fn : torch::autograd::Function<chunked_logprobs_fn> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& h, const at::Tensor& w,
                                                const at::Tensor& targets, double temperature,
                                                int64_t chunk_tokens, bool with_entropy) {
    const auto wc = as_compute(w, h);
    const int64_t N = h.size(0);
    std::vector<at::Tensor> logp, lse, ent;
    for (int64_t s = 0; s < N; s += chunk_tokens) {
      const int64_t n = std::min(chunk_tokens, N - s);
      at::Tensor l, e;
      logp.push_back(
          chunk_forward(h, wc, targets, temperature, s, n, &l, with_entropy ? &e : nullptr));
      lse.push_back(l);
      if (with_entropy) ent.push_back(e);
    }
    ctx->save_for_backward({h, w, targets, at::cat(lse)});
    ctx->saved_data["temperature"] = temperature;
    ctx->saved_data["chunk"] = chunk_tokens;
    auto out = at::cat(logp);
    if (!with_entropy) return {out};
    auto entropy = at::cat(ent);
    ctx->mark_non_differentiable({entropy});
    return {out, entropy};
  }

  // d logp_i / d z_ij = [j = t_i] - p_ij with z = logits / T: each chunk's logits are
  // recomputed, turned into g (onehot - p) / T in place, and multiplied into the gradients of
  // h (rows of the chunk) and W (summed over the chunks in W's dtype).
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad) {
    const auto saved = ctx->get_saved_variables();
    const auto &h = saved[0], &w = saved[1], &targets = saved[2], &lse = saved[3];
    const double temperature = ctx->saved_data["temperature"].toDouble();
    const int64_t chunk = ctx->saved_data["chunk"].toInt();
    const bool want_h = ctx->needs_input_grad(0), want_w = ctx->needs_input_grad(1);
    const at::Tensor& g = grad[0];  // (N,)
    at::Tensor gh, gw;
    if (!g.defined() || (!want_h && !want_w))
      return {gh, gw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const auto wc = as_compute(w, h);
    const int64_t N = h.size(0);
    if (want_h) gh = at::empty_like(h);
    for (int64_t s = 0; s < N; s += chunk) {
      const int64_t n = std::min(chunk, N - s);
      auto z = chunk_logits(h, wc, temperature, s, n);  // (n, V)
      const auto gc = g.narrow(0, s, n).to(z.scalar_type()).unsqueeze(1);  // (n, 1)
      z.sub_(lse.narrow(0, s, n).unsqueeze(1)).exp_();                      // softmax p
      z.mul_(gc).neg_();                                                    // -g p
      z.scatter_add_(1, targets.narrow(0, s, n).unsqueeze(1), gc);          // + g at the target
      if (temperature != 1.0) z.div_(temperature);
      const auto gz = z.to(h.scalar_type());  // the compute dtype, as the matmul's backward sees it
      const auto hc = h.narrow(0, s, n);
      if (want_h) {
        auto rows = gh.narrow(0, s, n);
        at::mm_out(rows, gz, wc);  // (n, H)
      }
      if (want_w) {
        if (!gw.defined()) {
          gw = at::mm(gz.t(), hc).to(w.scalar_type());  // (V, H)
        } else if (gz.scalar_type() == gw.scalar_type()) {
          gw.addmm_(gz.t(), hc);
        } else {
          gw.add_(at::mm(gz.t(), hc));  // bf16 products summed in the float32 master's dtype
        }
      }
    }
    return {gh, gw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

chunked_logprobs_out chunked_token_logprobs(const at::Tensor& h, const at::Tensor& weight,
                                            const at::Tensor& targets, double temperature,
                                            int64_t chunk_tokens, bool with_entropy) {
  check_inputs(h, weight, targets, chunk_tokens);
  chunked_logprobs_out r;
  if (h.size(0) == 0) {
    r.logp = at::empty({0}, h.options().dtype(at_least_float(h).scalar_type()));
    if (with_entropy) r.entropy = at::empty_like(r.logp);
    return r;
  }
  const bool grad = at::GradMode::is_enabled() && (h.requires_grad() || weight.requires_grad());
  if (grad) {
    auto out = chunked_logprobs_fn::apply(h, weight, targets, temperature, chunk_tokens,
                                          with_entropy);
    r.logp = out[0];
    if (with_entropy) r.entropy = out[1];
    return r;
  }
  // No graph to record: the forward alone, without the logsumexp the backward would need.
  const auto wc = as_compute(weight, h);
  const int64_t N = h.size(0);
  std::vector<at::Tensor> logp, ent;
  for (int64_t s = 0; s < N; s += chunk_tokens) {
    const int64_t n = std::min(chunk_tokens, N - s);
    at::Tensor e;
    logp.push_back(
        chunk_forward(h, wc, targets, temperature, s, n, nullptr, with_entropy ? &e : nullptr));
    if (with_entropy) ent.push_back(e);
  }
  r.logp = at::cat(logp);
  if (with_entropy) r.entropy = at::cat(ent);
  return r;
}

}  // namespace asyncrl

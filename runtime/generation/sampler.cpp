#include "runtime/generation/sampler.hpp"

#include "runtime/model/batch_invariant.hpp"
#include "runtime/model/logprobs.hpp"

namespace asyncrl {

sample_outputs sample_tokens(const at::Tensor& logits_in, const sample_inputs& in) {
  TORCH_CHECK(logits_in.dim() == 2, "logits must be (n, V), got ", logits_in.sizes());
  auto logits = logits_in.to(at::kFloat);
  const auto V = logits.size(1);
  auto greedy = in.temperature <= 0;  // (n,)
  auto temp = at::where(greedy, at::ones_like(in.temperature), in.temperature).unsqueeze(1);
  auto scaled = logits / temp;  // (n, V)

  // Stable descending sort: ties keep vocabulary order, so greedy picks the lowest id.
  auto sorted = at::sort(scaled, /*stable=*/true, /*dim=*/-1, /*descending=*/true);
  auto& values = std::get<0>(sorted);  // (n, V)
  auto& order = std::get<1>(sorted);   // (n, V) token ids by rank
  auto probs = at::softmax(values, -1);
  auto rank = at::arange(V, logits.options().dtype(at::kLong)).unsqueeze(0);  // (1, V)
  auto k = at::where(in.top_k > 0, in.top_k.clamp_max(V), at::full_like(in.top_k, V));
  auto keep = rank < k.unsqueeze(1);
  // Top-p keeps the smallest prefix whose mass reaches p: a token stays if the mass ranked
  // above it is still below p. p >= 1 keeps everything, whatever cumsum rounding says.
  auto before = probs.cumsum(-1) - probs;
  auto top_p = in.top_p.to(at::kFloat).unsqueeze(1);
  keep = keep.logical_and(before.lt(top_p).logical_or(top_p.ge(1.0)));
  keep = keep.logical_or(rank.eq(0));  // both filters keep a non-empty prefix

  // Inverse CDF in float64 over the kept prefix: the first rank whose CDF exceeds u * mass.
  auto cdf = (probs * keep).to(at::kDouble).cumsum(-1);
  auto target = in.uniform.to(at::kDouble).unsqueeze(1) * cdf.select(1, V - 1).unsqueeze(1);
  auto idx = cdf.le(target).sum(-1).clamp_max(V - 1);
  auto sampled = order.gather(1, idx.unsqueeze(1)).squeeze(1);
  auto tokens = at::where(greedy, order.select(1, 0), sampled);
  if (in.batch_invariant)
    return {tokens, bi_token_logprobs(logits, tokens, temp.squeeze(1).to(at::kFloat))};
  return {tokens, token_logprobs(scaled, tokens)};
}

at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& tokens, double temperature) {
  return token_logprobs(logits.to(at::kFloat) / temperature, tokens);
}

}  // namespace asyncrl

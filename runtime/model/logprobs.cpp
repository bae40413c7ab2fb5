#include "runtime/model/logprobs.hpp"

#include "runtime/model/precision.hpp"

namespace asyncrl {

at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& tokens) {
  // bf16 logits are normalised in float32: a bf16 log-softmax would round every log-prob.
  return at::log_softmax(at_least_float(logits), -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
}

}  // namespace asyncrl

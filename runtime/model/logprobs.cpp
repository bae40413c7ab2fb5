#include "runtime/model/logprobs.hpp"

namespace asyncrl {

at::Tensor token_logprobs(const at::Tensor& logits, const at::Tensor& tokens) {
  return at::log_softmax(logits, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
}

}  // namespace asyncrl

#include "runtime/train/sft_loss.hpp"

#include <algorithm>

#include "runtime/model/logprobs.hpp"
#include "runtime/model/model.hpp"

namespace asyncrl {

std::pair<torch::Tensor, int64_t> sft_loss(CausalLMImpl& model,
                                           const std::vector<const sft_example*>& batch,
                                           torch::Device device) {
  const auto B = static_cast<int64_t>(batch.size());
  int64_t T = 0;
  for (auto* e : batch)
    T = std::max<int64_t>(T, static_cast<int64_t>(e->seq.size()) - 1);
  std::vector<int64_t> ids(B * T, 0), tgt(B * T, 0);
  std::vector<float> mask(B * T, 0.f);
  int64_t count = 0;
  for (int64_t b = 0; b < B; ++b) {
    const auto& s = batch[b]->seq;
    for (int64_t t = 0; t + 1 < static_cast<int64_t>(s.size()); ++t) {
      ids[b * T + t] = s[t];
      tgt[b * T + t] = s[t + 1];
      // Target t+1 is a response token when t + 1 >= prompt_len; a tool's answer is not one
      // the model is taught to write.
      const auto& rm = batch[b]->response_mask;
      const int64_t r = t + 1 - batch[b]->prompt_len;
      if (r >= 0 && (rm.empty() || rm[static_cast<size_t>(r)] != 0)) {
        mask[b * T + t] = 1.f;
        ++count;
      }
    }
  }
  auto ids_t = torch::tensor(ids, torch::kLong).view({B, T}).to(device);
  auto tgt_t = torch::tensor(tgt, torch::kLong).view({B, T}).to(device);
  auto mask_t = torch::tensor(mask).view({B, T}).to(device);
  auto pos = torch::arange(T, torch::TensorOptions().dtype(torch::kLong).device(device))
                 .unsqueeze(0)
                 .expand({B, T});
  auto logits = model.forward(ids_t, pos);  // (B, T, V)
  auto lp = token_logprobs(logits, tgt_t);  // (B, T)
  auto loss = -(lp * mask_t).sum() / std::max<int64_t>(count, 1);
  return {loss, count};
}

}  // namespace asyncrl

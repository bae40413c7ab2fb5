#include "runtime/train/packing.hpp"

#include <map>
#include <stdexcept>

namespace asyncrl {

namespace {

struct builder {
  std::vector<int64_t> src, targets, row, col;
  std::vector<uint8_t> trained;  // 1: a model token (in the loss); 0: the environment's
  int64_t max_response = 0;
  int64_t loss_tokens = 0;

  void add_response(const scored_sample& s, int64_t m, int64_t flat_first_pred,
                    int64_t flat_first_tok) {
    // Token j is predicted by the output at the previous token: the last prompt token for
    // j = 0, else token j - 1 of this response.
    for (size_t j = 0; j < s.response.size(); ++j) {
      src.push_back(j == 0 ? flat_first_pred : flat_first_tok + static_cast<int64_t>(j) - 1);
      targets.push_back(s.response[j]);
      trained.push_back(model_token(s, j) ? 1 : 0);
      loss_tokens += trained.back();
      row.push_back(m);
      col.push_back(static_cast<int64_t>(j));
    }
    max_response = std::max<int64_t>(max_response, static_cast<int64_t>(s.response.size()));
  }
};

at::Tensor long_tensor(const std::vector<int64_t>& v, at::Device d) {
  return at::tensor(v, at::TensorOptions().dtype(at::kLong)).to(d);
}

}  // namespace

packed_batch pack_samples(const std::vector<const scored_sample*>& samples, bool shared_prompt,
                          at::Device device, bool padding_free) {
  if (samples.empty()) throw std::invalid_argument("pack_samples: empty micro-batch");
  for (auto* s : samples) {
    if (s->prompt.empty()) throw std::invalid_argument("pack_samples: a sample has no prompt");
    if (s->logprobs.size() != s->response.size() || s->versions.size() != s->response.size())
      throw std::invalid_argument("pack_samples: sample " + std::to_string(s->uid) +
                                  " has mismatched response/logprob/version lengths");
    if (!s->loss_mask.empty() && s->loss_mask.size() != s->response.size())
      throw std::invalid_argument("pack_samples: sample " + std::to_string(s->uid) +
                                  " has a loss mask of another length than its response");
  }
  // Packs: lists of sample indices sharing one sequence.
  std::vector<std::vector<int64_t>> packs;
  if (shared_prompt) {
    std::map<uint64_t, size_t> by_group;
    for (size_t m = 0; m < samples.size(); ++m) {
      auto it = by_group.find(samples[m]->group_id);
      if (it == by_group.end()) {
        by_group.emplace(samples[m]->group_id, packs.size());
        packs.push_back({static_cast<int64_t>(m)});
      } else {
        if (samples[packs[it->second][0]]->prompt != samples[m]->prompt)
          throw std::invalid_argument("pack_samples: group " +
                                      std::to_string(samples[m]->group_id) +
                                      " has responses to different prompts");
        packs[it->second].push_back(static_cast<int64_t>(m));
      }
    }
  } else {
    for (size_t m = 0; m < samples.size(); ++m)
      packs.push_back({static_cast<int64_t>(m)});
  }

  // Sequence b: the prompt of packs[b][0], then the responses of packs[b].
  std::vector<int64_t> seq_len;
  int64_t longest = 0, real = 0;
  for (auto& p : packs) {
    int64_t len = static_cast<int64_t>(samples[p[0]]->prompt.size());
    for (auto m : p)
      len += static_cast<int64_t>(samples[m]->response.size());
    seq_len.push_back(len);
    longest = std::max(longest, len);
    real += len;
  }
  // Padding-free: one row of all sequences; padded: a row of `longest` per sequence.
  const auto n_seq = static_cast<int64_t>(packs.size());
  const int64_t B = padding_free ? 1 : n_seq, T = padding_free ? real : longest;
  const bool dense_mask = shared_prompt && !padding_free;
  std::vector<int64_t> ids(B * T, 0), pos(B * T, 0);
  std::vector<uint8_t> mask(dense_mask ? B * T * T : 0, 0);
  std::vector<attention_block> blocks;
  builder bld;
  int64_t start = 0;  // flat index of sequence b's first token
  for (int64_t b = 0; b < n_seq; ++b) {
    const int64_t row = padding_free ? 0 : b;
    if (!padding_free) start = b * T;
    const auto& prompt = samples[packs[b][0]]->prompt;
    const auto Lp = static_cast<int64_t>(prompt.size());
    auto at = [&](int64_t t, int64_t u) -> uint8_t& { return mask[(row * T + t) * T + u]; };
    for (int64_t t = 0; t < Lp; ++t) {
      ids[start + t] = prompt[t];
      pos[start + t] = t;
      if (dense_mask)
        for (int64_t u = 0; u <= t; ++u)
          at(t, u) = 1;
    }
    // Row-relative offsets for the dense mask; flat offsets (start + off) for everything else.
    const int64_t first = start - row * T;
    if (padding_free)
      blocks.push_back(shared_prompt ? attention_block{start, Lp, 0, 0}
                                     : attention_block{start, seq_len[b], 0, 0});
    int64_t off = Lp;
    for (auto m : packs[b]) {
      const auto& r = samples[m]->response;
      const auto L = static_cast<int64_t>(r.size());
      for (int64_t j = 0; j < L; ++j) {
        ids[start + off + j] = r[j];
        pos[start + off + j] = Lp + j;  // every response restarts right after the prompt
        if (dense_mask) {
          for (int64_t u = 0; u < Lp; ++u)
            at(first + off + j, u) = 1;
          for (int64_t u = off; u <= off + j; ++u)
            at(first + off + j, u) = 1;
        }
      }
      if (padding_free && shared_prompt) blocks.push_back({start + off, L, start, Lp});
      bld.add_response(*samples[m], m, start + Lp - 1, start + off);
      off += L;
    }
    if (dense_mask)  // padding attends to itself only, so no row is empty
      for (int64_t t = off; t < T; ++t)
        at(t, t) = 1;
    if (padding_free) start += seq_len[b];
  }
  packed_batch out;
  out.ids = long_tensor(ids, device).view({B, T});
  out.pos = long_tensor(pos, device).view({B, T});
  if (dense_mask)
    out.mask = at::tensor(mask, at::TensorOptions().dtype(at::kByte))
                   .view({B, T, T})
                   .to(at::kBool)
                   .to(device);
  if (padding_free) out.segments = plan_segments(blocks, T, device);
  out.src = long_tensor(bld.src, device);
  out.targets = long_tensor(bld.targets, device);
  out.row = long_tensor(bld.row, device);
  out.col = long_tensor(bld.col, device);
  out.trained =
      at::tensor(bld.trained, at::TensorOptions().dtype(at::kByte)).to(at::kBool).to(device);
  out.loss_tokens = bld.loss_tokens;
  out.samples = static_cast<int64_t>(samples.size());
  out.max_response = bld.max_response;
  out.tokens_real = real;
  out.tokens_processed = B * T;
  return out;
}

at::Tensor to_rows(const at::Tensor& flat, const packed_batch& b) {
  auto out = at::zeros({b.samples, std::max<int64_t>(1, b.max_response)}, flat.options());
  return out.index_put({b.row, b.col}, flat);
}

at::Tensor response_mask(const packed_batch& b) {
  auto ones = at::ones({b.row.size(0)}, b.row.options().dtype(at::kBool));
  return to_rows(ones, b);
}

at::Tensor loss_mask(const packed_batch& b) {
  return to_rows(b.trained, b);
}

}  // namespace asyncrl

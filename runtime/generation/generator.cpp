#include "runtime/generation/generator.hpp"

#include <torch/nn/module.h>

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

#include "runtime/common/rng.hpp"
#include "runtime/generation/sampler.hpp"
#include "runtime/model/model.hpp"

namespace asyncrl {

const char* to_string(finish_reason r) {
  switch (r) {
    case finish_reason::eos:
      return "eos";
    case finish_reason::length:
      return "length";
    case finish_reason::interrupted:
      return "interrupted";
    case finish_reason::error:
      return "error";
  }
  return "?";
}

namespace {

// A live sequence; row i of the KV cache belongs to active[i].
struct slot {
  gen_request req;
  rng_stream rng;
  int64_t pos = 0;         // tokens already in the cache = position of next_input
  int64_t next_input = 0;  // last sampled token, not yet in the cache
};

std::vector<int32_t> context_of(const gen_request& r) {
  std::vector<int32_t> c(r.prompt);
  c.insert(c.end(), r.tokens.begin(), r.tokens.end());
  return c;
}

}  // namespace

struct generator::impl {
  std::shared_ptr<CausalLMImpl> model;
  generator_options opt;
  torch::Device device{torch::kCPU};
  kv_cache cache;
  std::deque<gen_request> waiting;
  std::vector<slot> active;
  std::vector<gen_result> finished;  // collected during a step, handed out at its end
  int64_t version = 0;
  generator_stats stats;

  impl(std::shared_ptr<CausalLMImpl> m, generator_options o) : model(std::move(m)), opt(o) {
    TORCH_CHECK(model != nullptr, "generator needs a model");
    TORCH_CHECK(opt.max_slots > 0 && opt.max_seq_len > 0, "generator needs slots and length");
    auto params = model->parameters();
    if (!params.empty()) device = params.front().device();
  }

  torch::TensorOptions long_opts() const {
    return torch::TensorOptions().dtype(torch::kLong).device(device);
  }

  void finish(gen_request req, finish_reason why, std::string error = {}) {
    if (why == finish_reason::interrupted)
      ++stats.interrupted;
    else
      ++stats.finished;
    finished.push_back(gen_result{std::move(req), why, std::move(error)});
  }

  // Why a request cannot run, or empty.
  std::string reject_reason(const gen_request& r) const {
    if (r.prompt.empty()) return "empty prompt";
    if (r.max_new_tokens <= 0) return "max_new_tokens must be > 0";
    if (r.tokens.size() != r.logprobs.size() || r.tokens.size() != r.versions.size())
      return "partial tokens, logprobs and versions differ in length";
    auto need = static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens;
    if (need > opt.max_seq_len)
      return "prompt (" + std::to_string(r.prompt.size()) + ") + max_new_tokens (" +
             std::to_string(r.max_new_tokens) + ") exceeds the generation length " +
             std::to_string(opt.max_seq_len);
    auto vocab = model->config().vocab_size;
    for (auto t : r.prompt)
      if (t < 0 || t >= vocab) return "prompt token id " + std::to_string(t) + " out of range";
    for (auto t : r.tokens)
      if (t < 0 || t >= vocab) return "partial token id " + std::to_string(t) + " out of range";
    return {};
  }

  // Logits at the last position of each context, (U, V); fills keys/values when asked.
  torch::Tensor forward_last(const std::vector<const std::vector<int32_t>*>& ctxs,
                             std::vector<torch::Tensor>& k, std::vector<torch::Tensor>& v) {
    const int64_t U = static_cast<int64_t>(ctxs.size());
    int64_t T = 0;
    for (auto* c : ctxs)
      T = std::max<int64_t>(T, static_cast<int64_t>(c->size()));
    // Right padding with causal attention: padded positions never influence real ones.
    std::vector<int64_t> ids(U * T, 0), last(U);
    for (int64_t u = 0; u < U; ++u) {
      auto& c = *ctxs[u];
      std::copy(c.begin(), c.end(), ids.begin() + u * T);
      last[u] = static_cast<int64_t>(c.size()) - 1;
      stats.prefill_tokens += static_cast<int64_t>(c.size());
    }
    auto ids_t = torch::tensor(ids, torch::kLong).view({U, T}).to(device);
    auto pos_t = torch::arange(T, long_opts()).unsqueeze(0).expand({U, T}).contiguous();
    auto last_t = torch::tensor(last, torch::kLong).to(device);
    ++stats.prefills;
    return model->prefill(ids_t, pos_t, last_t, k, v);
  }

  // Samples one token for each listed slot from its logits row, appends it, and finishes the
  // slots that hit EOS or their limit. `rows` are indices into `active`.
  void sample_into(const torch::Tensor& logits, const std::vector<size_t>& rows) {
    const auto n = static_cast<int64_t>(rows.size());
    std::vector<float> temp(n), top_p(n);
    std::vector<int64_t> top_k(n), no_eos;
    std::vector<double> uni(n);
    for (int64_t i = 0; i < n; ++i) {
      auto& s = active[rows[i]];
      if (s.req.ignore_eos && opt.eos_id >= 0) no_eos.push_back(i);
      temp[i] = static_cast<float>(s.req.sampling.temperature);
      top_k[i] = s.req.sampling.top_k;
      top_p[i] = static_cast<float>(s.req.sampling.top_p);
      uni[i] = s.rng.uniform(s.req.tokens.size());
    }
    sample_inputs in{torch::tensor(temp).to(device), torch::tensor(top_k).to(device),
                     torch::tensor(top_p).to(device),
                     torch::tensor(uni, torch::kDouble).to(device)};
    torch::Tensor masked = logits;
    if (!no_eos.empty()) {
      masked = logits.clone();
      masked.index_put_({torch::tensor(no_eos, torch::kLong).to(device), opt.eos_id},
                        -std::numeric_limits<float>::infinity());
    }
    auto out = sample_tokens(masked, in);
    auto toks = out.tokens.to(torch::kCPU);
    auto lps = out.logprobs.to(torch::kCPU);
    auto* tp = toks.data_ptr<int64_t>();
    auto* lp = lps.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      auto& s = active[rows[i]];
      s.req.tokens.push_back(static_cast<int32_t>(tp[i]));
      s.req.logprobs.push_back(lp[i]);
      s.req.versions.push_back(version);
      s.next_input = tp[i];
      ++stats.tokens_generated;
    }
  }

  // Removes finished slots (swap-remove keeps rows 0..n-1 dense in the cache).
  void retire_finished() {
    for (size_t i = active.size(); i-- > 0;) {
      auto& s = active[i];
      finish_reason why;
      if (opt.eos_id >= 0 && s.req.tokens.back() == opt.eos_id)
        why = finish_reason::eos;
      else if (static_cast<int32_t>(s.req.tokens.size()) >= s.req.max_new_tokens)
        why = finish_reason::length;
      else
        continue;
      finish(std::move(s.req), why);
      size_t last = active.size() - 1;
      if (i != last) {
        if (opt.use_kv_cache) cache.move_row(static_cast<int64_t>(last), static_cast<int64_t>(i));
        active[i] = std::move(active[last]);
      }
      active.pop_back();
    }
  }

  // Moves waiting requests into free slots: one prefill per distinct context (the G samples
  // of a prompt share it), then each samples its first token from its own stream.
  void admit() {
    std::vector<gen_request> batch;
    while (!waiting.empty() && static_cast<int64_t>(active.size() + batch.size()) < opt.max_slots) {
      auto r = std::move(waiting.front());
      waiting.pop_front();
      auto why = reject_reason(r);
      if (!why.empty()) {
        finish(std::move(r), finish_reason::error, why);
      } else if (!r.tokens.empty() && opt.eos_id >= 0 && r.tokens.back() == opt.eos_id) {
        finish(std::move(r), finish_reason::eos);
      } else if (static_cast<int32_t>(r.tokens.size()) >= r.max_new_tokens) {
        finish(std::move(r), finish_reason::length);
      } else {
        batch.push_back(std::move(r));
      }
    }
    if (batch.empty()) return;
    if (opt.use_kv_cache && cache.slots == 0)
      cache =
          kv_cache(model->config(), opt.max_slots, opt.max_seq_len, device, model->compute_dtype());

    std::map<std::vector<int32_t>, size_t> unique_index;
    std::vector<std::vector<int32_t>> unique;
    std::vector<size_t> which(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      auto ctx = context_of(batch[i]);
      auto it = unique_index.find(ctx);
      if (it == unique_index.end()) {
        it = unique_index.emplace(ctx, unique.size()).first;
        unique.push_back(std::move(ctx));
      }
      which[i] = it->second;
    }
    for (size_t start = 0; start < unique.size(); start += opt.prefill_batch) {
      size_t end = std::min(unique.size(), start + static_cast<size_t>(opt.prefill_batch));
      std::vector<const std::vector<int32_t>*> ctxs;
      for (size_t u = start; u < end; ++u)
        ctxs.push_back(&unique[u]);
      std::vector<torch::Tensor> k, v;
      auto logits = forward_last(ctxs, k, v);  // (U, V)
      std::vector<size_t> rows;
      std::vector<int64_t> logit_rows;
      for (size_t i = 0; i < batch.size(); ++i) {
        if (which[i] < start || which[i] >= end) continue;
        slot s;
        s.req = std::move(batch[i]);
        s.rng = rng_stream(opt.seed, s.req.prompt_id, s.req.sample_index);
        s.pos = static_cast<int64_t>(unique[which[i]].size());
        auto row = static_cast<int64_t>(active.size());
        if (opt.use_kv_cache)
          cache.write_prefix(row, k, v, static_cast<int64_t>(which[i] - start), s.pos);
        active.push_back(std::move(s));
        rows.push_back(static_cast<size_t>(row));
        logit_rows.push_back(static_cast<int64_t>(which[i] - start));
      }
      sample_into(logits.index_select(0, torch::tensor(logit_rows, torch::kLong).to(device)), rows);
    }
    retire_finished();
  }

  void decode_once() {
    const auto n = static_cast<int64_t>(active.size());
    std::vector<size_t> rows(n);
    for (int64_t i = 0; i < n; ++i)
      rows[i] = static_cast<size_t>(i);
    torch::Tensor logits;
    if (opt.use_kv_cache) {
      std::vector<int64_t> ids(n), pos(n);
      int64_t span = 0;
      for (int64_t i = 0; i < n; ++i) {
        ids[i] = active[i].next_input;
        pos[i] = active[i].pos;
        span = std::max(span, pos[i] + 1);
      }
      logits = model->decode(torch::tensor(ids, torch::kLong).to(device),
                             torch::tensor(pos, torch::kLong).to(device), span, cache);
    } else {
      std::vector<std::vector<int32_t>> ctx(n);
      std::vector<const std::vector<int32_t>*> ptrs(n);
      for (int64_t i = 0; i < n; ++i)
        ptrs[i] = &(ctx[i] = context_of(active[i].req));
      std::vector<torch::Tensor> k, v;
      logits = forward_last(ptrs, k, v);
    }
    for (auto& s : active)
      ++s.pos;
    ++stats.decode_steps;
    sample_into(logits, rows);
    retire_finished();
  }
};

generator::generator(std::shared_ptr<CausalLMImpl> model, generator_options opt)
    : impl_(std::make_unique<impl>(std::move(model), opt)) {}

generator::~generator() = default;

void generator::submit(gen_request r) {
  impl_->waiting.push_back(std::move(r));
}

std::vector<gen_result> generator::step(int max_steps) {
  torch::NoGradGuard no_grad;
  auto& m = *impl_;
  for (int i = 0; i < max_steps; ++i) {
    m.admit();
    if (m.active.empty()) break;
    m.decode_once();
  }
  m.admit();  // refill slots freed by the last decode, so the next call starts full
  return std::exchange(m.finished, {});
}

std::vector<gen_result> generator::run_all() {
  std::vector<gen_result> all;
  while (!idle() || !impl_->finished.empty()) {
    auto part = step(16);
    for (auto& r : part)
      all.push_back(std::move(r));
  }
  return all;
}

std::vector<gen_result> generator::interrupt() {
  auto& m = *impl_;
  for (auto& s : m.active) {
    ++s.req.interruptions;
    m.finish(std::move(s.req), finish_reason::interrupted);
  }
  m.active.clear();
  while (!m.waiting.empty()) {
    m.finish(std::move(m.waiting.front()), finish_reason::interrupted);
    m.waiting.pop_front();
  }
  return std::exchange(m.finished, {});
}

void generator::set_version(int64_t v) {
  impl_->version = v;
}
int64_t generator::version() const {
  return impl_->version;
}
std::vector<int32_t> generator::tokens_so_far(uint64_t id) const {
  for (const auto& s : impl_->active)
    if (s.req.id == id) return s.req.tokens;
  return {};
}
size_t generator::num_active() const {
  return impl_->active.size();
}
size_t generator::num_waiting() const {
  return impl_->waiting.size();
}
const generator_stats& generator::stats() const {
  return impl_->stats;
}

}  // namespace asyncrl

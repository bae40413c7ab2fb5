#include "runtime/generation/generator.hpp"

#include <torch/nn/module.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <deque>
#include <limits>
#include <map>
#include <optional>

#include "runtime/common/rng.hpp"
#include "runtime/generation/cuda_graph.hpp"
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

  // The decode step's device inputs and outputs for one padded batch size: the captured
  // graphs of that size read and write these very tensors.
  struct step_buffers {
    torch::Tensor ids, pos, temp, top_k, top_p, no_eos, uniform;  // (B,)
  };
  struct captured {
    std::unique_ptr<cuda_graph> graph;
    torch::Tensor tokens, logprobs;  // (B,) written by each replay
  };
  std::map<int64_t, step_buffers> buffers;                 // by padded batch size
  std::map<std::pair<int64_t, int64_t>, captured> graphs;  // by (batch, span) bucket
  std::vector<const void*> graph_weights;  // parameter addresses the graphs were captured on
  bool graphs_failed = false;
  std::string graph_error;
  std::optional<cuda_graph::pool_id> graph_pool;  // this generator's own, from its first capture

  impl(std::shared_ptr<CausalLMImpl> m, generator_options o) : model(std::move(m)), opt(o) {
    TORCH_CHECK(model != nullptr, "generator needs a model");
    TORCH_CHECK(opt.max_slots > 0 && opt.max_seq_len > 0, "generator needs slots and length");
    auto params = model->parameters();
    if (!params.empty()) device = params.front().device();
    // One matmul for q/k/v and one for gate/up in every decode step and prefill.
    if (model->fused_decode) model->pack_projections();
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
    in.batch_invariant = model->batch_invariant;
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

  // Removes active[i] (swap-remove keeps rows 0..n-1 dense in the cache).
  void remove_row(size_t i) {
    size_t last = active.size() - 1;
    if (i != last) {
      if (opt.use_kv_cache) cache.move_row(static_cast<int64_t>(last), static_cast<int64_t>(i));
      active[i] = std::move(active[last]);
    }
    active.pop_back();
  }

  // Removes finished slots.
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
      remove_row(i);
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

  // The decode step on device tensors: writes the keys/values of `b.ids` at `b.pos` and
  // returns (tokens, logprobs) sampled with `b.uniform`. Keys 0..span-1 are read (the rest of
  // the span is masked per row). No host synchronisation, so it can be captured.
  std::pair<torch::Tensor, torch::Tensor> device_step(const step_buffers& b, int64_t span) {
    auto logits = model->decode(b.ids, b.pos, span, cache);  // (B, V)
    if (opt.eos_id >= 0) {
      // ignore_eos rows: EOS gets no mass (as the host path's index_put did).
      auto col = logits.select(1, opt.eos_id);
      col.copy_(torch::where(
          b.no_eos, torch::full({}, -std::numeric_limits<float>::infinity(), col.options()), col));
    }
    auto out = sample_tokens(
        logits, sample_inputs{b.temp, b.top_k, b.top_p, b.uniform, model->batch_invariant});
    return {out.tokens, out.logprobs};
  }

  // Graph buckets: the batch padded to a power of two (at most max_slots), the key span to a
  // power of two from 64 (at most max_seq_len), so a run needs few graphs.
  int64_t batch_bucket(int64_t n) const {
    int64_t b = 1;
    while (b < n)
      b *= 2;
    return std::min(b, opt.max_slots);
  }
  int64_t span_bucket(int64_t span) const {
    int64_t s = 64;
    while (s < span)
      s *= 2;
    return std::min(s, opt.max_seq_len);
  }

  bool graphs_usable() {
    if (!opt.cuda_graphs || graphs_failed || !device.is_cuda() || !cuda_graph::available())
      return false;
    // Graphs hold the parameters' addresses: weights replaced by new tensors (not copied in
    // place) make them stale.
    std::vector<const void*> now;
    for (auto& p : model->parameters())
      now.push_back(p.data_ptr());
    if (now != graph_weights) {
      graphs.clear();
      graph_pool.reset();  // a pool is not reused once its graphs are gone: take a new one
      graph_weights = std::move(now);
    }
    return true;
  }

  captured* graph_for(step_buffers& b, int64_t B, int64_t span) {
    auto key = std::make_pair(B, span);
    auto it = graphs.find(key);
    if (it != graphs.end()) return &it->second;
    captured c;
    std::string why;
    if (!graph_pool) graph_pool = cuda_graph::new_pool();
    c.graph = cuda_graph::capture(
        [&] {
          auto out = device_step(b, span);
          c.tokens = out.first;
          c.logprobs = out.second;
        },
        *graph_pool, why);
    if (!c.graph) {
      graphs_failed = true;
      graph_error = why;
      spdlog::warn("generator: CUDA graph capture failed, decoding eagerly: {}", why);
      return nullptr;
    }
    ++stats.graphs_captured;
    return &graphs.emplace(key, std::move(c)).first->second;
  }

  // Up to `max_steps` decode steps on the device for every active row, then one host read
  // of the tokens. Returns the steps run.
  int64_t decode_chunk(int64_t max_steps) {
    const auto n = static_cast<int64_t>(active.size());
    int64_t most = 1, max_pos = 0;
    for (const auto& s : active) {
      most =
          std::max<int64_t>(most, s.req.max_new_tokens - static_cast<int64_t>(s.req.tokens.size()));
      max_pos = std::max(max_pos, s.pos);
    }
    const int64_t C = std::max<int64_t>(1, std::min(max_steps, most));
    const bool use_graphs = graphs_usable();
    const int64_t B = use_graphs ? batch_bucket(n) : n;
    // Host inputs; padding rows (n..B-1, free cache slots) decode token 0 at position 0.
    std::vector<int64_t> ids(B, 0), pos(B, 0), top_k(B, 0);
    std::vector<float> temp(B, 1.f), top_p(B, 1.f);
    std::vector<uint8_t> no_eos(B, 0);
    std::vector<double> uni(C * B, 0.5);
    for (int64_t i = 0; i < n; ++i) {
      auto& s = active[i];
      ids[i] = s.next_input;
      pos[i] = s.pos;
      temp[i] = static_cast<float>(s.req.sampling.temperature);
      top_k[i] = s.req.sampling.top_k;
      top_p[i] = static_cast<float>(s.req.sampling.top_p);
      no_eos[i] = s.req.ignore_eos ? 1 : 0;
      // Token j of a response always draws counter j of its stream, whatever the chunking.
      for (int64_t c = 0; c < C; ++c)
        uni[c * B + i] = s.rng.uniform(s.req.tokens.size() + static_cast<size_t>(c));
    }
    auto& b = buffers[B];
    auto put = [&](torch::Tensor& dst, torch::Tensor src) {
      src = src.to(device);
      if (dst.defined() && dst.sizes() == src.sizes())
        dst.copy_(src);  // in place: captured graphs read these addresses
      else
        dst = src;
    };
    put(b.ids, torch::tensor(ids, torch::kLong));
    put(b.pos, torch::tensor(pos, torch::kLong));
    put(b.temp, torch::tensor(temp));
    put(b.top_k, torch::tensor(top_k, torch::kLong));
    put(b.top_p, torch::tensor(top_p));
    put(b.no_eos, torch::tensor(no_eos, torch::kUInt8).to(torch::kBool));
    const auto uni_all = torch::tensor(uni, torch::kDouble).view({C, B}).to(device);
    put(b.uniform, uni_all[0].clone());
    auto toks_all = torch::empty({C, B}, torch::TensorOptions().dtype(torch::kLong).device(device));
    auto lps_all = torch::empty({C, B}, torch::TensorOptions().dtype(torch::kFloat).device(device));
    const int64_t last_pos = opt.max_seq_len - 1;
    for (int64_t c = 0; c < C; ++c) {
      // Rows past their end keep writing at the last cache position (their tokens are dropped).
      const int64_t span = std::min(opt.max_seq_len, max_pos + c + 1);
      torch::Tensor tok, lp;
      captured* g = use_graphs ? graph_for(b, B, span_bucket(span)) : nullptr;
      if (g != nullptr) {
        g->graph->replay();
        ++stats.graph_replays;
        tok = g->tokens;
        lp = g->logprobs;
      } else {
        std::tie(tok, lp) = device_step(b, span);
      }
      toks_all[c].copy_(tok);
      lps_all[c].copy_(lp);
      if (c + 1 < C) {
        b.ids.copy_(tok);
        b.pos.add_(1).clamp_max_(last_pos);
        b.uniform.copy_(uni_all[c + 1]);
      }
    }
    const auto toks = toks_all.narrow(1, 0, n).cpu();  // the chunk's one host read
    const auto lps = lps_all.narrow(1, 0, n).cpu();
    const auto* tp = toks.data_ptr<int64_t>();
    const auto* lp = lps.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
      auto& s = active[i];
      for (int64_t c = 0; c < C; ++c) {
        const auto t = tp[c * n + i];
        s.req.tokens.push_back(static_cast<int32_t>(t));
        s.req.logprobs.push_back(lp[c * n + i]);
        s.req.versions.push_back(version);
        s.next_input = t;
        ++s.pos;
        ++stats.tokens_generated;
        if ((opt.eos_id >= 0 && t == opt.eos_id) ||
            static_cast<int32_t>(s.req.tokens.size()) >= s.req.max_new_tokens)
          break;  // finished: the rest of its chunk is dropped
      }
    }
    stats.decode_steps += C;
    ++stats.chunks;
    retire_finished();
    return C;
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
  for (int64_t done = 0; done < max_steps;) {
    m.admit();
    if (m.active.empty()) break;
    if (m.opt.use_kv_cache) {
      done += m.decode_chunk(max_steps - done);
    } else {
      m.decode_once();
      ++done;
    }
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

std::optional<gen_result> generator::cancel(uint64_t id) {
  auto& m = *impl_;
  for (size_t i = 0; i < m.active.size(); ++i) {
    if (m.active[i].req.id != id) continue;
    gen_result r{std::move(m.active[i].req), finish_reason::interrupted, {}};
    m.remove_row(i);
    ++m.stats.interrupted;
    return r;
  }
  for (auto it = m.waiting.begin(); it != m.waiting.end(); ++it) {
    if (it->id != id) continue;
    gen_result r{std::move(*it), finish_reason::interrupted, {}};
    m.waiting.erase(it);
    ++m.stats.interrupted;
    return r;
  }
  return std::nullopt;
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
const gen_request* generator::active_request(uint64_t id) const {
  for (const auto& s : impl_->active)
    if (s.req.id == id) return &s.req;
  return nullptr;
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
const std::string& generator::graph_error() const {
  return impl_->graph_error;
}

}  // namespace asyncrl

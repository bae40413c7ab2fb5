#include "runtime/serve/serve_engine.hpp"

#include <random>

#include "runtime/model/model.hpp"
#include "runtime/serve/choice_text.hpp"

namespace asyncrl {

struct serve_engine::choice {
  uint64_t gen_id = 0;
  choice_text out;
  std::string finish_reason;  // set once ended
  bool running = true;        // still in the generator
};

struct serve_engine::job_state {
  serve_job job;
  job_sink sink;
  std::vector<choice> choices;
  int32_t open = 0;  // choices not ended
};

serve_engine::serve_engine(std::shared_ptr<CausalLMImpl> model, tokenizer_ptr tok,
                           generator_options opt, int32_t steps_per_round, int64_t version)
    : model_(std::move(model)),
      tok_(std::move(tok)),
      max_seq_len_(opt.max_seq_len),
      steps_per_round_(std::max(1, steps_per_round)),
      version_(version) {
  // Stop tokens are the jobs' own (a chat ends at its end-of-turn token, a completion at EOS),
  // so the generator stops none itself.
  opt.eos_id = -1;
  gen_ = std::make_unique<generator>(model_, opt);
  gen_->set_version(version);
  fresh_stream_ = std::random_device{}();
  fresh_stream_ = (fresh_stream_ << 32) ^ std::random_device{}();
  thread_ = std::thread([this] { loop(); });
}

serve_engine::~serve_engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  job_update bye;
  bye.done = true;
  bye.error = "the server is shutting down";
  std::lock_guard<std::mutex> sinks(sink_mu_);
  for (auto& [id, j] : jobs_)
    j->sink(bye);
  for (auto& [id, in] : incoming_)
    in.second(bye);
}

uint64_t serve_engine::submit(serve_job job, job_sink sink) {
  uint64_t id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    id = next_job_++;
    incoming_.emplace_back(id, std::make_pair(std::move(job), std::move(sink)));
    ++stats_.requests;
  }
  wake_.notify_all();
  return id;
}

void serve_engine::cancel(uint64_t job) {
  std::lock_guard<std::mutex> sinks(sink_mu_);  // waits out a running call of its sink
  {
    std::lock_guard<std::mutex> lock(mu_);
    cancelled_.insert(job);
  }
  wake_.notify_all();
}

void serve_engine::stage_weights(std::function<void(CausalLMImpl&)> load, int64_t version) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    staged_load_ = std::move(load);
    staged_version_ = version;
  }
  wake_.notify_all();
}

int64_t serve_engine::version() const {
  std::lock_guard<std::mutex> lock(mu_);
  return version_;
}

serve_engine_stats serve_engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void serve_engine::admit(std::deque<std::pair<uint64_t, std::pair<serve_job, job_sink>>>& in) {
  for (auto& [id, js] : in) {
    auto j = std::make_unique<job_state>();
    j->job = std::move(js.first);
    j->sink = std::move(js.second);
    const uint64_t stream = j->job.seed ? static_cast<uint64_t>(*j->job.seed) : fresh_stream_++;
    for (int32_t i = 0; i < j->job.n; ++i) {
      gen_request r;
      r.id = next_gen_id_++;
      r.prompt_id = stream;
      r.sample_index = static_cast<uint32_t>(i);
      r.prompt = j->job.prompt;
      r.max_new_tokens = j->job.max_tokens;
      r.sampling = j->job.sampling;
      by_gen_id_[r.id] = {id, i};
      j->choices.push_back(choice{r.id, choice_text(j->job.stop, j->job.stop_ids), {}, true});
      gen_->submit(std::move(r));
    }
    j->open = j->job.n;
    jobs_[id] = std::move(j);
  }
  in.clear();
}

void serve_engine::loop() {
  for (;;) {
    std::deque<std::pair<uint64_t, std::pair<serve_job, job_sink>>> incoming;
    std::set<uint64_t> cancelled;
    std::function<void(CausalLMImpl&)> load;
    int64_t load_version = 0;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] {
        return stop_ || !incoming_.empty() || !cancelled_.empty() || staged_load_ || !gen_->idle();
      });
      if (stop_) return;
      incoming.swap(incoming_);
      cancelled.swap(cancelled_);
      load = std::move(staged_load_);
      staged_load_ = nullptr;
      load_version = staged_version_;
    }
    for (auto id : cancelled) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) {  // cancelled before it was admitted
        for (auto q = incoming.begin(); q != incoming.end(); ++q)
          if (q->first == id) {
            incoming.erase(q);
            break;
          }
        continue;
      }
      for (auto& c : it->second->choices) {
        if (c.running) gen_->cancel(c.gen_id);
        by_gen_id_.erase(c.gen_id);
      }
      jobs_.erase(it);
    }
    if (load) {
      // Between rounds no decode step is running, so the weights change at a token boundary:
      // running choices continue under the new weights (their tokens carry both versions).
      load(*model_);
      gen_->set_version(load_version);
      std::lock_guard<std::mutex> lock(mu_);
      version_ = load_version;
      ++stats_.weight_updates;
    }
    admit(incoming);
    std::vector<gen_result> finished;
    try {
      finished = gen_->step(steps_per_round_);
    } catch (const std::exception& e) {
      // A failed forward (out of memory...) fails the jobs that were running, not the server.
      job_update fail;
      fail.done = true;
      fail.error = std::string("generation failed: ") + e.what();
      std::lock_guard<std::mutex> sinks(sink_mu_);
      for (auto& [id, j] : jobs_)
        j->sink(fail);
      gen_->interrupt();  // drops every request: their jobs were just failed
      jobs_.clear();
      by_gen_id_.clear();
      continue;
    }
    advance(std::move(finished));
  }
}

void serve_engine::advance(std::vector<gen_result> finished) {
  std::map<uint64_t, const gen_result*> done;
  for (const auto& r : finished)
    done[r.request.id] = &r;
  int64_t new_tokens = 0, active = 0;
  std::vector<std::pair<uint64_t, job_update>> updates;
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    auto& j = *it->second;
    job_update u;
    u.version = gen_->version();
    for (size_t i = 0; i < j.choices.size(); ++i) {
      auto& c = j.choices[i];
      if (c.out.ended()) {
        u.completion_tokens += static_cast<int64_t>(c.out.tokens().size());
        continue;
      }
      const gen_request* req = nullptr;
      auto d = done.find(c.gen_id);
      if (d != done.end())
        req = &d->second->request;
      else
        req = gen_->active_request(c.gen_id);
      if (req != nullptr) {
        for (size_t t = c.out.tokens().size(); t < req->tokens.size() && !c.out.ended(); ++t) {
          ++new_tokens;
          if (c.out.push(req->tokens[t], req->logprobs[t], *tok_)) c.finish_reason = "stop";
        }
      }
      if (c.out.ended() && c.running && d == done.end()) {
        gen_->cancel(c.gen_id);  // a stop token or string: free its slot now
      }
      if (d != done.end() || c.out.ended()) {
        c.running = false;
        by_gen_id_.erase(c.gen_id);
        if (!c.out.ended()) {
          c.out.finish();
          c.finish_reason = c.out.stopped() ? "stop" : "length";
        }
        --j.open;
      } else {
        ++active;
      }
      choice_delta cd;
      cd.index = static_cast<int32_t>(i);
      cd.text = c.out.take_text();
      const auto& toks = c.out.tokens();
      cd.tokens.assign(toks.begin() + static_cast<long>(c.out.tokens_taken()), toks.end());
      cd.logprobs.assign(c.out.logprobs().begin() + static_cast<long>(c.out.tokens_taken()),
                         c.out.logprobs().end());
      c.out.mark_tokens_taken();
      if (c.out.ended()) cd.finish_reason = c.finish_reason;
      u.completion_tokens += static_cast<int64_t>(toks.size());
      if (!cd.text.empty() || !cd.tokens.empty() || !cd.finish_reason.empty())
        u.deltas.push_back(std::move(cd));
    }
    u.done = j.open == 0;
    if (!u.deltas.empty() || u.done) updates.emplace_back(it->first, std::move(u));
    ++it;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.tokens_generated += new_tokens;
    stats_.active_choices = active;
  }
  // Sinks run without mu_ (a sink may take its own locks), but under sink_mu_, and a job
  // cancelled meanwhile is skipped: after cancel() returns its sink is never called.
  std::lock_guard<std::mutex> sinks(sink_mu_);
  std::set<uint64_t> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone = cancelled_;
  }
  for (auto& [id, u] : updates)
    if (!gone.count(id)) jobs_.at(id)->sink(u);
  for (auto it = jobs_.begin(); it != jobs_.end();)
    it = it->second->open == 0 ? jobs_.erase(it) : std::next(it);
}

}  // namespace asyncrl

#include "runtime/task/evaluate.hpp"

#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <stdexcept>

#include "runtime/model/model.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/task/task_sections.hpp"
#include "runtime/tools/episode_turns.hpp"

namespace asyncrl {

namespace {

// The environment of one evaluation pass (env.kind): the calculator, or one external process
// serving the pass's episodes a turn at a time (evaluation runs on one thread). Counts the
// calls that failed after their replays; over env.max_failure_rate of them (once
// env.failure_window calls were made, or at the end of the pass) the evaluation fails, as a
// run does.
class pass_env {
 public:
  explicit pass_env(const eval_options& opt) : opt_(opt) {
    if (opt.env.kind == env_kind::external)
      ext_ = std::make_unique<external_env>(external_env_options_from(opt.env));
  }

  env_answer answer(const env_call& c, chat_format format) {
    auto a = ext_ ? external_answer(*ext_, c, opt_.seed, opt_.env.max_retries)
                  : calculator_answer(format, c.text, opt_.tool);
    ++calls_;
    if (a.failed) {
      ++failures_;
      last_error_ = a.error;
    }
    if (calls_ >= opt_.env.failure_window) check();
    return a;
  }

  void check() const {
    if (static_cast<double>(failures_) <= opt_.env.max_failure_rate * static_cast<double>(calls_))
      return;
    throw std::runtime_error(
        "eval: the environment (" + (ext_ ? ext_->describe() : std::string("calculator")) +
        ") failed " + std::to_string(failures_) + " of " + std::to_string(calls_) +
        " calls, over env.max_failure_rate (" + std::to_string(opt_.env.max_failure_rate) +
        "); the last failure: " + last_error_);
  }

  int64_t calls() const { return calls_; }
  int64_t failures() const { return failures_; }

 private:
  const eval_options& opt_;
  std::unique_ptr<external_env> ext_;
  int64_t calls_ = 0, failures_ = 0;
  std::string last_error_;
};

// An evaluated episode: where its last model turn starts, its model turns as text (for an
// external environment's replays) and what its environment said at the end.
struct episode_marks {
  size_t turn_start = 0;
  std::vector<std::string> turns;
  bool has_env_reward = false;
  double env_reward = 0;
  bool env_failed = false;
};

// A model turn of episode `m` ended: the environment answers it, and the episode either goes on
// (true: the answer is appended to `req`) or ends. The rollouter's rule (actors/rollouter.cpp):
// every model turn goes to the environment, the last one a limit allows too, and the answer is
// appended only while turns and tokens are left.
bool next_turn(pass_env& env, const tokenizer& tok, const prompt_format& fmt,
               const eval_options& opt, int64_t budget, int64_t max_seq_len, const qa_example& ex,
               gen_request& req, episode_marks& m) {
  auto& t = req.tokens;
  m.turns.push_back(model_turn_text(tok, t, m.turn_start, fmt.stop_id));
  env_call c;
  c.episode = req.id;
  c.turn = static_cast<int32_t>(m.turns.size());
  c.text = m.turns.back();
  c.earlier.assign(m.turns.begin(), m.turns.end() - 1);
  c.task = tok.decode(req.prompt);
  c.ground_truth = ex.ground_truth;
  auto a = env.answer(c, fmt.chat);
  m.env_failed = a.failed;
  if (a.done && a.has_reward) {
    m.has_env_reward = true;
    m.env_reward = a.reward;
  }
  if (episode_ends(a, static_cast<int64_t>(m.turns.size()), static_cast<int64_t>(t.size()),
                   opt.max_turns, budget))
    return false;
  auto obs = observation_tokens(tok, fmt.chat, a.observations, opt.env.max_observation_tokens,
                                budget - static_cast<int64_t>(t.size()));
  for (auto id : obs.ids) {
    t.push_back(id);
    req.logprobs.push_back(0.f);
    req.versions.push_back(0);
  }
  m.turn_start = t.size();
  if (!obs.fits) return false;
  // Its tokens so far count against max_new_tokens: one more turn, within budget.
  req.max_new_tokens =
      static_cast<int32_t>(std::min({static_cast<int64_t>(t.size()) + opt.max_new_tokens, budget,
                                     max_seq_len - static_cast<int64_t>(req.prompt.size())}));
  return true;
}

// Runs every (question, sample) pair through one generator and returns the mean reward.
double run_pass(std::shared_ptr<CausalLMImpl> model, const tokenizer& tok, const prompt_format& fmt,
                const std::vector<qa_example>& data, const eval_options& opt,
                const sampling_params& sp, int64_t samples, eval_result* out,
                std::vector<eval_response>* kept) {
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0;
  for (auto& ex : data) {
    prompts.push_back(encode_prompt(tok, fmt, ex));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts.back().size()));
  }
  const bool episodes = opt.env.kind != env_kind::none;
  const int64_t budget =
      episodes && opt.max_episode_tokens > 0 ? opt.max_episode_tokens : opt.max_new_tokens;
  generator_options go;
  go.max_slots = opt.batch;
  go.max_seq_len = std::min<int64_t>(longest + budget, model->config().max_position_embeddings);
  go.seed = opt.seed;
  go.eos_id = fmt.stop_id;
  generator gen(model, go);
  for (size_t q = 0; q < data.size(); ++q)
    for (int64_t s = 0; s < samples; ++s) {
      gen_request r;
      r.id = q * samples + s;
      r.prompt_id = q;
      r.sample_index = static_cast<uint32_t>(s);
      r.prompt = prompts[q];
      r.max_new_tokens = static_cast<int32_t>(std::min<int64_t>(
          std::min(opt.max_new_tokens, budget), go.max_seq_len - (int64_t)prompts[q].size()));
      r.sampling = sp;
      gen.submit(std::move(r));
    }
  pass_env env(opt);
  double correct = 0, tokens = 0;
  std::vector<gen_result> results;
  std::map<uint64_t, episode_marks> marks;
  for (auto batch = gen.run_all(); !batch.empty(); batch = gen.run_all()) {
    for (auto& res : batch) {
      auto& m = marks[res.request.id];
      if (episodes && res.reason != finish_reason::error &&
          next_turn(env, tok, fmt, opt, budget, go.max_seq_len, data[res.request.prompt_id],
                    res.request, m)) {
        gen.submit(std::move(res.request));
        continue;
      }
      results.push_back(std::move(res));
    }
  }
  env.check();
  for (auto& res : results) {
    const auto& ex = data[res.request.prompt_id];
    const auto& t = res.request.tokens;
    const auto& m = marks[res.request.id];
    // The scorer judges the final model turn (empty when the episode ended in the environment's
    // turn); env.reward says which rewards count.
    std::vector<int32_t> last(t.begin() + static_cast<std::ptrdiff_t>(m.turn_start), t.end());
    double reward = score_response(tok.decode(last), ex.ground_truth);
    if (episodes)
      reward = episode_reward(opt.env.reward, reward, m.has_env_reward, m.env_reward, m.env_failed);
    correct += reward;
    tokens += static_cast<double>(t.size());
    if (kept != nullptr)
      kept->push_back(eval_response{static_cast<int64_t>(res.request.prompt_id), tok.decode(t),
                                    reward, std::max<int64_t>(1, m.turns.size())});
  }
  if (kept != nullptr)
    std::sort(kept->begin(), kept->end(), [](const eval_response& a, const eval_response& b) {
      return a.question < b.question;
    });
  if (out != nullptr) {
    out->mean_response_tokens = tokens / std::max<size_t>(1, results.size());
    out->env_calls = env.calls();
    out->env_failures = env.failures();
  }
  return correct / std::max<size_t>(1, results.size());
}

}  // namespace

eval_result evaluate(std::shared_ptr<CausalLMImpl> model, const tokenizer& tok,
                     const prompt_format& fmt, const std::vector<qa_example>& data,
                     const eval_options& opt) {
  auto t0 = std::chrono::steady_clock::now();
  eval_result r;
  r.questions = static_cast<int64_t>(data.size());
  r.samples = opt.samples;
  bool was_training = model->is_training();
  model->eval();
  sampling_params greedy;
  greedy.temperature = 0.0;
  r.pass1 = run_pass(model, tok, fmt, data, opt, greedy, 1, &r,
                     opt.keep_responses ? &r.responses : nullptr);
  if (opt.samples > 1)
    r.mean_at_n = run_pass(model, tok, fmt, data, opt, opt.sampling, opt.samples, nullptr, nullptr);
  model->train(was_training);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

eval_options greedy_eval_options(const eval_section& e, int64_t seed) {
  eval_options eo;
  eo.samples = 1;
  eo.max_new_tokens = e.max_new_tokens;
  eo.batch = e.batch;
  eo.seed = static_cast<uint64_t>(seed);
  eo.env = e.env;
  eo.max_turns = std::max<int64_t>(1, e.max_turns);
  eo.max_episode_tokens = e.max_episode_tokens;
  eo.tool = e.tool;
  return eo;
}

}  // namespace asyncrl

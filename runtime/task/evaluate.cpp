#include "runtime/task/evaluate.hpp"

#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <map>

#include "runtime/model/model.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/task/task_sections.hpp"
#include "runtime/tools/builtin_env.hpp"

namespace asyncrl {

namespace {

// The tool's answer to an evaluated episode's model turn: the calculator's, or with the tool
// off an error for every call.
env_step eval_tool_turn(const eval_options& opt, chat_format format, const std::string& text) {
  auto step = calculator_turn(format, text);
  if (!opt.tool)
    for (auto& o : step.observations)
      o = "error: tool unavailable\n";
  return step;
}

// Where the model's last turn starts in an episode's response.
struct episode_marks {
  size_t turn_start = 0;
  int64_t turns = 0;
};

// Runs every (question, sample) pair through one generator and returns the mean reward.
double run_pass(std::shared_ptr<CausalLMImpl> model, const tokenizer& tok, const prompt_format& fmt,
                const std::vector<qa_example>& data, const eval_options& opt,
                const sampling_params& sp, int64_t samples, double* mean_tokens,
                std::vector<eval_response>* kept) {
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0;
  for (auto& ex : data) {
    prompts.push_back(encode_prompt(tok, fmt, ex));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts.back().size()));
  }
  const bool episodes = opt.env == env_kind::calculator && opt.max_turns > 1;
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
  double correct = 0, tokens = 0;
  std::vector<gen_result> results;
  std::map<uint64_t, episode_marks> marks;
  // Episodes: a model turn that calls the tool gets its answer appended and goes back into the
  // generator, until the final answer or a limit; the final model turn is scored.
  for (auto batch = gen.run_all(); !batch.empty(); batch = gen.run_all()) {
    for (auto& res : batch) {
      auto& m = marks[res.request.id];
      auto& t = res.request.tokens;
      ++m.turns;
      const bool room = static_cast<int64_t>(t.size()) < budget;
      if (episodes && res.reason == finish_reason::eos && m.turns < opt.max_turns && room) {
        std::vector<int32_t> turn(t.begin() + static_cast<std::ptrdiff_t>(m.turn_start),
                                  t.end() - 1);  // without its stop token
        auto step = eval_tool_turn(opt, fmt.chat, tok.decode(turn));
        if (!step.done) {
          std::string obs;
          for (auto& o : step.observations)
            obs += o;
          auto ids = tok.encode(obs);
          if (static_cast<int64_t>(t.size() + ids.size()) < budget) {
            for (auto id : ids) {
              t.push_back(id);
              res.request.logprobs.push_back(0.f);
              res.request.versions.push_back(0);
            }
            m.turn_start = t.size();
            // Its tokens so far count against max_new_tokens: one more turn, within budget.
            res.request.max_new_tokens = static_cast<int32_t>(
                std::min({static_cast<int64_t>(t.size()) + opt.max_new_tokens, budget,
                          go.max_seq_len - static_cast<int64_t>(res.request.prompt.size())}));
            gen.submit(std::move(res.request));
            continue;
          }
        }
      }
      results.push_back(std::move(res));
    }
  }
  for (auto& res : results) {
    const auto& ex = data[res.request.prompt_id];
    const auto& t = res.request.tokens;
    const auto start = marks[res.request.id].turn_start;
    std::vector<int32_t> last(t.begin() + static_cast<std::ptrdiff_t>(start), t.end());
    const double reward = score_response(tok.decode(last), ex.ground_truth);
    correct += reward;
    tokens += static_cast<double>(t.size());
    if (kept != nullptr)
      kept->push_back(eval_response{static_cast<int64_t>(res.request.prompt_id), tok.decode(t),
                                    reward, marks[res.request.id].turns});
  }
  if (kept != nullptr)
    std::sort(kept->begin(), kept->end(), [](const eval_response& a, const eval_response& b) {
      return a.question < b.question;
    });
  if (mean_tokens != nullptr) *mean_tokens = tokens / std::max<size_t>(1, results.size());
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
  r.pass1 = run_pass(model, tok, fmt, data, opt, greedy, 1, &r.mean_response_tokens,
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

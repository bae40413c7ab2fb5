#include "runtime/task/evaluate.hpp"

#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>

#include "runtime/model/model.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/task/task_sections.hpp"

namespace asyncrl {

namespace {

// Runs every (question, sample) pair through one generator and returns the mean reward.
double run_pass(std::shared_ptr<CausalLMImpl> model, const tokenizer& tok, const prompt_format& fmt,
                const std::vector<qa_example>& data, const eval_options& opt,
                const sampling_params& sp, int64_t samples, double* mean_tokens) {
  std::vector<std::vector<int32_t>> prompts;
  int64_t longest = 0;
  for (auto& ex : data) {
    prompts.push_back(encode_prompt(tok, fmt, ex));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(prompts.back().size()));
  }
  generator_options go;
  go.max_slots = opt.batch;
  go.max_seq_len =
      std::min<int64_t>(longest + opt.max_new_tokens, model->config().max_position_embeddings);
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
      r.max_new_tokens = static_cast<int32_t>(
          std::min<int64_t>(opt.max_new_tokens, go.max_seq_len - (int64_t)prompts[q].size()));
      r.sampling = sp;
      gen.submit(std::move(r));
    }
  double correct = 0, tokens = 0;
  auto results = gen.run_all();
  for (auto& res : results) {
    const auto& ex = data[res.request.prompt_id];
    correct += score_response(tok.decode(res.request.tokens), ex.ground_truth);
    tokens += static_cast<double>(res.request.tokens.size());
  }
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
  r.pass1 = run_pass(model, tok, fmt, data, opt, greedy, 1, &r.mean_response_tokens);
  if (opt.samples > 1)
    r.mean_at_n = run_pass(model, tok, fmt, data, opt, opt.sampling, opt.samples, nullptr);
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
  return eo;
}

}  // namespace asyncrl

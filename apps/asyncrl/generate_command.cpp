#include "apps/asyncrl/generate_command.hpp"

#include <algorithm>
#include <stdexcept>

#include "apps/asyncrl/reports.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

namespace {

// c.samples responses to `prompt`, in sample order; each its own stream of `c.seed`.
std::vector<gen_result> sample_responses(const model_bundle& b, const std::vector<int32_t>& prompt,
                                         int32_t eos_id, const generate_command& c) {
  generator_options go;
  go.max_slots = std::max<int64_t>(1, c.samples);
  go.max_seq_len = std::min<int64_t>(static_cast<int64_t>(prompt.size()) + c.max_new_tokens,
                                     b.config.max_position_embeddings);
  go.seed = c.seed;
  go.eos_id = eos_id;
  generator gen(b.model.ptr(), go);
  for (int64_t s = 0; s < c.samples; ++s) {
    gen_request r;
    r.id = static_cast<uint64_t>(s);
    r.sample_index = static_cast<uint32_t>(s);
    r.prompt = prompt;
    r.max_new_tokens = static_cast<int32_t>(go.max_seq_len - static_cast<int64_t>(prompt.size()));
    r.sampling = c.sampling;
    gen.submit(std::move(r));
  }
  auto results = gen.run_all();
  std::sort(results.begin(), results.end(),
            [](const gen_result& a, const gen_result& b) { return a.request.id < b.request.id; });
  return results;
}

}  // namespace

int run_generate_command(const generate_command& c) {
  auto b = open_model(c.model);
  const auto& tok = need_tokenizer(b, c.model.model_dir, "generate needs a tokenizer");
  // The model directory's chat template (data.chat_template=auto), its default system prompt.
  const auto fmt = make_prompt_format(tok, chat_format::auto_detect, "");
  auto prompt = c.raw ? tok.encode(c.prompt) : encode_prompt(tok, fmt, c.prompt);
  for (auto& res : sample_responses(b, prompt, c.raw ? tok.eos_id() : fmt.stop_id, c)) {
    if (res.reason == finish_reason::error) throw std::runtime_error(res.error);
    print_line(sample_line(res, tok));
  }
  return 0;
}

}  // namespace asyncrl

#include "apps/asyncrl/generate_command.hpp"

#include <algorithm>
#include <iostream>
#include <stdexcept>

#include "apps/asyncrl/reports.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/text/utf8_stream.hpp"

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

// One response, its text written to stdout as the tokens come. A token may end inside a UTF-8
// character (byte-level BPE splits them): utf8_stream holds such bytes back until the
// character is complete, so the output is never a broken character.
void stream_response(const model_bundle& b, const tokenizer& tok,
                     const std::vector<int32_t>& prompt, int32_t eos_id,
                     const generate_command& c) {
  generator_options go;
  go.max_slots = 1;
  go.max_seq_len = std::min<int64_t>(static_cast<int64_t>(prompt.size()) + c.max_new_tokens,
                                     b.config.max_position_embeddings);
  go.seed = c.seed;
  go.eos_id = eos_id;
  generator gen(b.model.ptr(), go);
  gen_request r;
  r.prompt = prompt;
  r.max_new_tokens = static_cast<int32_t>(go.max_seq_len - static_cast<int64_t>(prompt.size()));
  r.sampling = c.sampling;
  gen.submit(std::move(r));
  utf8_stream out;
  size_t shown = 0;  // tokens already passed to `out`
  auto show = [&](const std::vector<int32_t>& tokens) {
    for (; shown < tokens.size(); ++shown)
      std::cout << out.push(tok.token_bytes(tokens[shown], /*skip_special=*/true));
    std::cout << std::flush;
  };
  while (!gen.idle()) {
    auto done = gen.step(1);
    if (!done.empty()) {
      if (done[0].reason == finish_reason::error) throw std::runtime_error(done[0].error);
      show(done[0].request.tokens);
    } else {
      show(gen.tokens_so_far(0));
    }
  }
  std::cout << out.flush() << std::endl;
}

}  // namespace

int run_generate_command(const generate_command& c) {
  auto b = open_model(c.model);
  const auto& tok = need_tokenizer(b, c.model.model_dir, "generate needs a tokenizer");
  // The model directory's chat template (data.chat_template=auto), its default system prompt.
  const auto fmt = make_prompt_format(tok, chat_format::auto_detect, "");
  auto prompt = c.raw ? tok.encode(c.prompt) : encode_prompt(tok, fmt, c.prompt);
  const int32_t stop = c.raw ? tok.eos_id() : fmt.stop_id;
  if (c.stream) {
    if (c.samples != 1) throw std::runtime_error("--stream prints one response: drop --samples");
    stream_response(b, tok, prompt, stop, c);
    return 0;
  }
  for (auto& res : sample_responses(b, prompt, stop, c)) {
    if (res.reason == finish_reason::error) throw std::runtime_error(res.error);
    print_line(sample_line(res, tok));
  }
  return 0;
}

}  // namespace asyncrl

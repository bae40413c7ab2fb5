#include "apps/asyncrl/eval_command.hpp"

#include "apps/asyncrl/reports.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/task/dataset.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

int run_eval_command(const eval_command& c) {
  auto data = load_jsonl(c.data_path);
  auto b = open_model(c.model);
  const auto& tok = need_tokenizer(b, c.model.model_dir, "eval needs a tokenizer");
  // Not greedy_eval_options: the flags choose samples and sampling, not a config's eval section.
  eval_options eo;
  eo.samples = c.samples;
  eo.max_new_tokens = c.max_new_tokens;
  eo.batch = c.batch;
  eo.sampling = c.sampling;
  eo.seed = c.seed;
  // The model directory's chat template (data.chat_template=auto), its default system prompt.
  auto r =
      evaluate(b.model.ptr(), tok, make_prompt_format(tok, chat_format::auto_detect, ""), data, eo);
  print_line(eval_line(c.model.model_dir, c.data_path, r, c.samples, c.sampling.temperature));
  return 0;
}

}  // namespace asyncrl

#include "apps/asyncrl/eval_command.hpp"

#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "apps/asyncrl/reports.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/task/dataset.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/parquet_data.hpp"
#include "runtime/task/prompting.hpp"

namespace asyncrl {

int run_eval_command(const eval_command& c) {
  auto data = load_examples(c.data_path, "test", {});  // JSONL or Parquet
  auto b = open_model(c.model);
  const auto& tok = need_tokenizer(b, c.model.model_dir, "eval needs a tokenizer");
  // Not greedy_eval_options: the flags choose samples and sampling, not a config's eval section.
  eval_options eo;
  eo.samples = c.samples;
  eo.max_new_tokens = c.max_new_tokens;
  eo.batch = c.batch;
  eo.sampling = c.sampling;
  eo.seed = c.seed;
  const bool external = c.env.kind == env_kind::external;
  if (external && c.env.command.empty() == c.env.socket.empty())
    throw std::invalid_argument("eval: --tool external needs --env-command or --env-socket");
  if (!external && !(c.env.command.empty() && c.env.socket.empty()))
    throw std::invalid_argument("eval: --env-command and --env-socket need --tool external");
  if (c.max_turns > 1 && c.env.kind == env_kind::none)
    throw std::invalid_argument("eval: --max-turns " + std::to_string(c.max_turns) +
                                " needs --tool (nothing answers the model's turns)");
  if (c.tool_off && c.env.kind != env_kind::calculator)
    throw std::invalid_argument("eval: --tool-off applies to --tool calculator");
  eo.env = c.env;
  eo.max_turns = c.max_turns;
  eo.max_episode_tokens = c.max_episode_tokens;
  eo.tool = !c.tool_off;
  eo.keep_responses = !c.responses_path.empty();
  std::ofstream out;
  if (eo.keep_responses) {  // opened first: a bad path fails before the model runs
    out.open(c.responses_path);
    if (!out) throw std::runtime_error("eval: cannot write " + c.responses_path);
  }
  // The model directory's chat template (data.chat_template=auto), its default system prompt.
  auto r =
      evaluate(b.model.ptr(), tok, make_prompt_format(tok, chat_format::auto_detect, ""), data, eo);
  for (const auto& x : r.responses) {
    const auto& ex = data[static_cast<size_t>(x.question)];
    nlohmann::ordered_json j{{"question", ex.question},
                             {"ground_truth", ex.ground_truth},
                             {"response", x.text},
                             {"reward", x.reward},
                             {"turns", x.turns}};
    out << j.dump() << "\n";
  }
  if (out.is_open() && !out.flush())
    throw std::runtime_error("eval: writing " + c.responses_path + " failed");
  print_line(eval_line(c.model.model_dir, c.data_path, r, c.samples, c.sampling.temperature));
  return 0;
}

}  // namespace asyncrl

#include "runtime/task/task_data.hpp"

#include <filesystem>

#include "runtime/task/parquet_data.hpp"
#include "runtime/task/task_arith.hpp"
#include "runtime/task/task_sections.hpp"
#include "runtime/task/task_tools.hpp"

namespace asyncrl {

task_data load_task_data(const data_section& cfg, bool numeric_answers) {
  jsonl_fields fields;
  fields.prompt_key = cfg.prompt_key;
  fields.answer_key = cfg.answer_key;
  fields.numeric_answers = numeric_answers;
  task_data d;
  const bool need_builtin = cfg.train_path.empty() || cfg.test_path.empty();
  if (need_builtin) {
    arith_splits splits;
    const auto train_n = static_cast<size_t>(cfg.train_size);
    const auto test_n = static_cast<size_t>(cfg.test_size);
    const auto seed = static_cast<uint64_t>(cfg.seed);
    if (cfg.task == "arith_tools") {
      arith_tools_options opt;
      opt.terms_min = static_cast<int>(cfg.arith_tools.terms_min);
      opt.terms_max = static_cast<int>(cfg.arith_tools.terms_max);
      opt.digits = static_cast<int>(cfg.arith_tools.digits);
      opt.ops = cfg.arith_tools.ops;
      splits = generate_arith_tools_examples(
          opt, train_n, test_n, seed,
          cfg.arith_tools.traces ? tool_answer_style::trace : tool_answer_style::no_tool);
    } else {
      arith_options opt;
      opt.min_digits = static_cast<int>(cfg.arith.min_digits);
      opt.max_digits = static_cast<int>(cfg.arith.max_digits);
      opt.ops = cfg.arith.ops;
      splits = generate_arith_splits(opt, train_n, test_n, seed);
    }
    auto name = "built-in " + cfg.task + " (seed " + std::to_string(cfg.seed) + ")";
    d.train = std::move(splits.train);
    d.test = std::move(splits.test);
    d.train_source = d.test_source = name;
    d.builtin = true;
  }
  if (!cfg.train_path.empty()) {
    d.train = load_examples(cfg.train_path, "train", fields);
    d.train_source = cfg.train_path;
  }
  if (!cfg.test_path.empty()) {
    d.test = load_examples(cfg.test_path, "test", fields);
    d.test_source = cfg.test_path;
  }
  return d;
}

void write_task_data(const task_data& d, const std::string& dir) {
  std::filesystem::create_directories(dir);
  save_jsonl((std::filesystem::path(dir) / "train.jsonl").string(), d.train);
  save_jsonl((std::filesystem::path(dir) / "test.jsonl").string(), d.test);
}

}  // namespace asyncrl

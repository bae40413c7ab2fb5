#include "apps/asyncrl/export_command.hpp"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "actors/run_checkpoint.hpp"
#include "apps/asyncrl/reports.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/train/policy_weights.hpp"

namespace asyncrl {

namespace {

namespace fs = std::filesystem;

// The policy of the newest usable checkpoint of the run in `run_dir`, on the CPU, with its
// run's tokenizer; `step` is the checkpoint's step.
model_bundle policy_of_run(const std::string& run_dir, int64_t& step) {
  const auto yaml = (fs::path(run_dir) / "config.yaml").string();
  if (!std::ifstream(yaml))
    throw std::runtime_error("export --run " + run_dir +
                             ": no config.yaml there (not a run "
                             "directory?)");
  auto lc = load_config(yaml, {"runtime.run_dir=" + run_dir});
  const auto& cfg = lc->cfg;
  const auto dir = cfg.checkpoint.dir.empty() ? (fs::path(run_dir) / "checkpoints").string()
                                              : cfg.checkpoint.dir;
  std::vector<std::string> skipped;
  auto p = load_resume_point(dir, &skipped);
  if (!p) throw std::runtime_error("export --run " + run_dir + ": no usable checkpoint in " + dir);
  // The architecture and tokenizer of the run's starting policy; the weights come from the
  // checkpoint, which holds them in the trainer's precision (float64 or float32).
  auto b = load_or_init_policy(cfg.model, cfg.runtime.seed, torch::kCPU);
  if (cfg.trainer.precision == train_precision::float64) cast_parameters(*b.model, torch::kFloat64);
  load_policy_from_trainer_state(p->run.trainer.state, b.model);
  step = p->run.step;
  return b;
}

}  // namespace

int run_export_command(const export_command& c) {
  if (c.dtype != "float32" && c.dtype != "bf16")
    throw std::runtime_error("export --dtype: expected float32 or bf16, got '" + c.dtype + "'");
  if (c.model_dir.empty() == c.run_dir.empty())
    throw std::runtime_error("export: give one of --model DIR and --run RUN_DIR");
  const auto dtype = c.dtype == "bf16" ? st_dtype::bf16 : st_dtype::f32;
  nlohmann::ordered_json line;
  if (!c.model_dir.empty()) {
    export_model_dir(c.model_dir, c.out_dir, dtype);
    line["source"] = c.model_dir;
  } else {
    int64_t step = 0;
    auto b = policy_of_run(c.run_dir, step);
    save_model_dir(c.out_dir, *b.model, b.tokenizer.get(), dtype);
    line["source"] = c.run_dir;
    line["step"] = step;
  }
  const auto config = model_config::load((fs::path(c.out_dir) / kConfigFile).string());
  line["out"] = c.out_dir;
  line["dtype"] = c.dtype;
  line["parameters"] = config.num_parameters();
  print_line(line);
  return 0;
}

}  // namespace asyncrl

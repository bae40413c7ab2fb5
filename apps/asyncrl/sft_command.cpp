#include "apps/asyncrl/sft_command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "apps/asyncrl/reports.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/task/epoch_order.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/task_data.hpp"
#include "runtime/train/lr_schedule.hpp"
#include "runtime/train/optimizer.hpp"
#include "runtime/train/sft_loss.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

// Epoch-wise shuffled order from our own stream, so the batches are the same everywhere.
class batch_sampler {
 public:
  batch_sampler(size_t n, uint64_t seed) : n_(n), seed_(seed) { reshuffle(); }
  std::vector<size_t> next(size_t b) {
    std::vector<size_t> out;
    while (out.size() < b) {
      if (at_ == order_.size()) ++epoch_, reshuffle();
      out.push_back(order_[at_++]);
    }
    return out;
  }

 private:
  void reshuffle() {
    order_ = epoch_order(n_, seed_, epoch_, kSftBatchOrder);
    at_ = 0;
  }
  size_t n_;
  uint64_t seed_;
  int64_t epoch_ = 0;
  std::vector<size_t> order_;
  size_t at_ = 0;
};

// The training split, less the held-out tail that sft.stop_at_accuracy checks against.
struct sft_split {
  size_t n_train = 0;           // train on examples 0 .. n_train-1
  std::vector<qa_example> val;  // the last sft.val_size examples; empty when the check is off
};

sft_split split_validation(const std::vector<qa_example>& train, const sft_section& s) {
  sft_split out{train.size(), {}};
  if (s.stop_at_accuracy <= 0) return out;
  const auto v = static_cast<size_t>(s.val_size);
  if (v >= out.n_train)
    throw std::runtime_error("sft.val_size (" + std::to_string(v) +
                             ") must be smaller than the training split (" +
                             std::to_string(out.n_train) + " examples)");
  out.n_train -= v;
  out.val.assign(train.begin() + static_cast<std::ptrdiff_t>(out.n_train), train.end());
  return out;
}

// The first n training examples as prompt + response tokens; each must fit the model's context.
std::vector<sft_example> encode_examples(const tokenizer& tok, const prompt_format& fmt,
                                         const task_data& data, size_t n, int64_t max_positions) {
  std::vector<sft_example> examples;
  for (size_t i = 0; i < n; ++i) {
    sft_example e;
    e.seq = encode_prompt(tok, fmt, data.train[i]);
    e.prompt_len = static_cast<int64_t>(e.seq.size());
    auto resp = encode_trace_response(tok, fmt, data.train[i].answer);
    e.seq.insert(e.seq.end(), resp.ids.begin(), resp.ids.end());
    if (std::find(resp.mask.begin(), resp.mask.end(), 0) != resp.mask.end())
      e.response_mask = std::move(resp.mask);
    if (static_cast<int64_t>(e.seq.size()) > max_positions)
      throw std::runtime_error(data.train_source + ": example " + std::to_string(i + 1) + " has " +
                               std::to_string(e.seq.size()) +
                               " tokens, beyond max_position_embeddings " +
                               std::to_string(max_positions));
    examples.push_back(std::move(e));
  }
  return examples;
}

policy_optimizer make_optimizer(CausalLMImpl& model, const sft_section& s) {
  optimizer_options oo;
  oo.lr = s.lr;
  oo.weight_decay = s.weight_decay;
  oo.grad_clip = s.grad_clip;
  oo.beta2 = 0.98;
  return policy_optimizer(model.parameters(), oo);
}

struct step_result {
  double loss;  // not finite: the optimizer skipped the step
  double lr;
  step_outcome outcome;
};

// One optimizer step on `batch` at the schedule's lr for `step`.
step_result sft_step(CausalLMImpl& model, policy_optimizer& opt, const lr_schedule& sched,
                     int64_t step, const std::vector<const sft_example*>& batch,
                     torch::Device device) {
  opt.zero_grad();
  auto loss = sft_loss(model, batch, device).first;
  double lv = loss.item<double>();
  if (std::isfinite(lv)) loss.backward();
  double lr = sched.at(step);
  auto outcome = opt.step(lr, std::isfinite(lv));
  if (outcome.skipped)
    spdlog::warn("sft: step {} skipped (loss {}, grad norm {})", step, lv, outcome.grad_norm);
  return {lv, lr, outcome};
}

// The held-out greedy accuracy into rep.val_accuracy; true once it reaches sft.stop_at_accuracy.
bool held_out_reached(model_bundle& policy, const prompt_format& fmt,
                      const std::vector<qa_example>& val, const eval_options& opts,
                      const sft_section& s, int64_t steps_done, sft_report& rep) {
  policy.model->eval();
  rep.val_accuracy = evaluate(policy.model.ptr(), *policy.tokenizer, fmt, val, opts).pass1;
  policy.model->train();
  if (rep.val_accuracy < s.stop_at_accuracy) {
    // The stopping rule's progress: a warm start that never gets there is visible early.
    spdlog::info("sft: step {}: held-out greedy accuracy {:.3f} (stops at {:.3f})", steps_done,
                 rep.val_accuracy, s.stop_at_accuracy);
    return false;
  }
  spdlog::info(
      "sft: held-out greedy accuracy {:.3f} >= sft.stop_at_accuracy {:.3f} at step "
      "{}: stopping",
      rep.val_accuracy, s.stop_at_accuracy, steps_done);
  return true;
}

// AdamW on the sft.* schedule for sft.steps steps, or until the held-out check passes. Fills
// rep's steps, losses (final: mean over the last 10% of steps), speed and val_accuracy.
void train_sft(model_bundle& policy, const prompt_format& fmt,
               const std::vector<sft_example>& examples, const std::vector<qa_example>& val,
               const run_config& cfg, torch::Device device, sft_report& rep) {
  const auto& s = cfg.sft;
  auto& model = *policy.model;
  auto opt = make_optimizer(model, s);
  lr_schedule sched{s.schedule, s.lr, s.warmup_steps, s.steps, s.min_lr_ratio};
  batch_sampler sampler(examples.size(), static_cast<uint64_t>(cfg.runtime.seed));
  const auto val_opts = greedy_eval_options(cfg.eval, cfg.runtime.seed);
  progress_line progress("sft", s.steps, s.log_every);
  model.train();
  double tokens = 0, tail_loss = 0, last_loss = NAN;
  int64_t tail_n = 0, steps_run = s.steps;
  const int64_t tail_from = s.steps - std::max<int64_t>(1, s.steps / 10);
  for (int64_t step = 0; step < s.steps; ++step) {
    std::vector<const sft_example*> batch;
    for (auto i : sampler.next(static_cast<size_t>(s.batch_size)))
      batch.push_back(&examples[i]);
    for (auto* e : batch)
      tokens += static_cast<double>(e->seq.size() - 1);
    auto r = sft_step(model, opt, sched, step, batch, device);
    if (step == 0) rep.first_loss = r.loss;
    if (step >= tail_from) tail_loss += r.loss, ++tail_n;
    last_loss = r.loss;
    progress.update(step + 1, {{"loss", r.loss},
                               {"lr", r.lr},
                               {"gnorm", r.outcome.grad_norm},
                               {"tok/s", tokens / std::max(1e-9, progress.elapsed_s())}});
    if (!val.empty() && (step + 1) % s.eval_every == 0 &&
        held_out_reached(policy, fmt, val, val_opts, s, step + 1, rep)) {
      steps_run = step + 1;
      break;
    }
  }
  progress.finish();
  if (!val.empty() && rep.val_accuracy < s.stop_at_accuracy)
    spdlog::warn(
        "sft: held-out greedy accuracy {:.3f} never reached sft.stop_at_accuracy {:.3f} "
        "in {} steps",
        rep.val_accuracy, s.stop_at_accuracy, s.steps);
  rep.steps = steps_run;
  rep.skipped_steps = opt.skipped_steps();
  rep.final_loss = tail_n > 0 ? tail_loss / tail_n : last_loss;
  rep.seconds = progress.elapsed_s();
  rep.tokens_per_s = tokens / std::max(1e-9, rep.seconds);
}

}  // namespace

sft_report run_sft(const loaded_config& lc) {
  const auto& cfg = lc.cfg;
  auto run = start_run(lc);
  spdlog::info("sft: {} train / {} test examples from {}", run.data.train.size(),
               run.data.test.size(), run.data.train_source);

  auto policy = load_fitting_policy(cfg, run.device, /*rollouters=*/0);
  const auto& tok = *policy.tokenizer;
  const auto fmt = make_prompt_format(tok, cfg.data.chat_template, cfg.data.system_prompt);
  spdlog::info("sft: model {} ({} parameters, {} layers, hidden {}) on {}", model_source(cfg),
               policy.config.num_parameters(), policy.config.num_hidden_layers,
               policy.config.hidden_size, cfg.runtime.device);

  auto split = split_validation(run.data.train, cfg.sft);
  auto examples =
      encode_examples(tok, fmt, run.data, split.n_train, policy.config.max_position_embeddings);
  sft_report rep;
  rep.parameters = policy.config.num_parameters();
  train_sft(policy, fmt, examples, split.val, cfg, run.device, rep);

  rep.model_dir = (fs::path(run.dir) / "final").string();
  const bool bf16 = cfg.runtime.save_dtype == weights_dtype::bf16;
  save_model_dir(rep.model_dir, *policy.model, &tok, bf16 ? st_dtype::bf16 : st_dtype::f32);
  spdlog::info("sft: wrote {}", rep.model_dir);

  rep.eval = evaluate(policy.model.ptr(), tok, fmt, run.data.test,
                      greedy_eval_options(cfg.eval, cfg.runtime.seed));
  spdlog::info("sft: greedy accuracy {:.3f} on {} test questions", rep.eval.pass1,
               rep.eval.questions);
  write_summary((fs::path(run.dir) / "sft_summary.json").string(), sft_summary(rep));
  return rep;
}

int run_sft_command(const loaded_config& lc) {
  print_line(sft_line(run_sft(lc)));
  return 0;
}

}  // namespace asyncrl

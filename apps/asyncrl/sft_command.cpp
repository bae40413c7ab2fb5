#include "apps/asyncrl/sft_command.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>

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

}  // namespace

sft_report run_sft(const loaded_config& lc) {
  const auto& cfg = lc.cfg;
  auto run = start_run(lc);
  const auto& run_dir = run.dir;
  const auto device = run.device;
  const auto& data = run.data;
  spdlog::info("sft: {} train / {} test examples from {}", data.train.size(), data.test.size(),
               data.train_source);

  auto policy = load_or_init_policy(cfg, device);
  const auto& tok = *policy.tokenizer;
  auto& model = *policy.model;
  spdlog::info("sft: model {} ({} parameters, {} layers, hidden {}) on {}", model_source(cfg),
               policy.config.num_parameters(), policy.config.num_hidden_layers,
               policy.config.hidden_size, cfg.runtime.device);

  // sft.stop_at_accuracy: the last val_size training examples are held out to decide when.
  std::vector<qa_example> val;
  size_t n_train = data.train.size();
  if (cfg.sft.stop_at_accuracy > 0) {
    const auto v = static_cast<size_t>(cfg.sft.val_size);
    if (v >= n_train)
      throw std::runtime_error("sft.val_size (" + std::to_string(v) +
                               ") must be smaller than the training split (" +
                               std::to_string(n_train) + " examples)");
    n_train -= v;
    val.assign(data.train.begin() + static_cast<std::ptrdiff_t>(n_train), data.train.end());
  }
  std::vector<sft_example> examples;
  for (size_t i = 0; i < n_train; ++i) {
    sft_example e;
    e.seq = encode_prompt(tok, data.train[i].question);
    e.prompt_len = static_cast<int64_t>(e.seq.size());
    auto resp = encode_response(tok, data.train[i].answer);
    e.seq.insert(e.seq.end(), resp.begin(), resp.end());
    if (static_cast<int64_t>(e.seq.size()) > policy.config.max_position_embeddings)
      throw std::runtime_error(data.train_source + ": example " + std::to_string(i + 1) + " has " +
                               std::to_string(e.seq.size()) +
                               " tokens, beyond max_position_embeddings " +
                               std::to_string(policy.config.max_position_embeddings));
    examples.push_back(std::move(e));
  }

  optimizer_options oo;
  oo.lr = cfg.sft.lr;
  oo.weight_decay = cfg.sft.weight_decay;
  oo.grad_clip = cfg.sft.grad_clip;
  oo.beta2 = 0.98;
  policy_optimizer opt(model.parameters(), oo);
  lr_schedule sched{cfg.sft.schedule, cfg.sft.lr, cfg.sft.warmup_steps, cfg.sft.steps,
                    cfg.sft.min_lr_ratio};
  batch_sampler sampler(examples.size(), static_cast<uint64_t>(cfg.runtime.seed));

  sft_report rep;
  rep.parameters = policy.config.num_parameters();
  progress_line progress("sft", cfg.sft.steps, cfg.sft.log_every);
  model.train();
  double tokens = 0, tail_loss = 0;
  int64_t tail_n = 0;
  const int64_t tail_from = cfg.sft.steps - std::max<int64_t>(1, cfg.sft.steps / 10);
  double last_loss = NAN;
  const auto val_opts = greedy_eval_options(cfg.eval, cfg.runtime.seed);
  int64_t steps_run = cfg.sft.steps;
  for (int64_t step = 0; step < cfg.sft.steps; ++step) {
    std::vector<const sft_example*> batch;
    for (auto i : sampler.next(static_cast<size_t>(cfg.sft.batch_size)))
      batch.push_back(&examples[i]);
    for (auto* e : batch)
      tokens += static_cast<double>(e->seq.size() - 1);
    opt.zero_grad();
    auto [loss, count] = sft_loss(model, batch, device);
    double lv = loss.item<double>();
    if (std::isfinite(lv)) loss.backward();
    double lr = sched.at(step);
    auto outcome = opt.step(lr, std::isfinite(lv));
    if (outcome.skipped)
      spdlog::warn("sft: step {} skipped (loss {}, grad norm {})", step, lv, outcome.grad_norm);
    if (step == 0) rep.first_loss = lv;
    if (step >= tail_from) tail_loss += lv, ++tail_n;
    last_loss = lv;
    progress.update(step + 1, {{"loss", lv},
                               {"lr", lr},
                               {"gnorm", outcome.grad_norm},
                               {"tok/s", tokens / std::max(1e-9, progress.elapsed_s())}});
    if (!val.empty() && (step + 1) % cfg.sft.eval_every == 0) {
      model.eval();
      rep.val_accuracy = evaluate(policy.model.ptr(), tok, val, val_opts).pass1;
      model.train();
      if (rep.val_accuracy >= cfg.sft.stop_at_accuracy) {
        steps_run = step + 1;
        spdlog::info(
            "sft: held-out greedy accuracy {:.3f} >= sft.stop_at_accuracy {:.3f} at step "
            "{}: stopping",
            rep.val_accuracy, cfg.sft.stop_at_accuracy, steps_run);
        break;
      }
    }
  }
  progress.finish();
  if (!val.empty() && rep.val_accuracy < cfg.sft.stop_at_accuracy)
    spdlog::warn(
        "sft: held-out greedy accuracy {:.3f} never reached sft.stop_at_accuracy {:.3f} "
        "in {} steps",
        rep.val_accuracy, cfg.sft.stop_at_accuracy, cfg.sft.steps);
  rep.steps = steps_run;
  rep.skipped_steps = opt.skipped_steps();
  rep.final_loss = tail_n > 0 ? tail_loss / tail_n : last_loss;
  rep.seconds = progress.elapsed_s();
  rep.tokens_per_s = tokens / std::max(1e-9, rep.seconds);

  rep.model_dir = (fs::path(run_dir) / "final").string();
  save_model_dir(rep.model_dir, model, &tok);
  spdlog::info("sft: wrote {}", rep.model_dir);

  rep.eval = evaluate(policy.model.ptr(), tok, data.test, val_opts);
  spdlog::info("sft: greedy accuracy {:.3f} on {} test questions", rep.eval.pass1,
               rep.eval.questions);

  write_summary((fs::path(run_dir) / "sft_summary.json").string(), sft_summary(rep));
  return rep;
}

int run_sft_command(const loaded_config& lc) {
  print_line(sft_line(run_sft(lc)));
  return 0;
}

}  // namespace asyncrl

#include "tests/actor_harness.hpp"
#include "messages/errors.hpp"
#include "runtime/text/char_tokenizer.hpp"

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <spdlog/spdlog.h>

#include <fstream>

#include "actors/controller.hpp"
#include "messages/type_ids.hpp"
#include "runtime/model/model.hpp"
#include "runtime/model/weight_sync.hpp"
#include "runtime/task/task_arith.hpp"
#include "tests/test_util.hpp"

namespace asyncrl::test {

coordinated_system::coordinated_system() {
  cfg_.set("scheduler.policy", caf::atom("testing"));
  register_message_types(cfg_);
  register_error_category(cfg_);
  sys_ = std::make_unique<caf::actor_system>(cfg_);
}

coordinated_system::~coordinated_system() {
  for (auto& a : tracked_)
    caf::anon_send_exit(a, caf::exit_reason::kill);
  tracked_.clear();
  auto& s = sched();
  while (s.try_run_once() || s.trigger_timeout()) {
  }
}

caf::scheduler::test_coordinator& coordinated_system::sched() {
  return dynamic_cast<caf::scheduler::test_coordinator&>(sys_->scheduler());
}

bool coordinated_system::run_until(const std::function<bool()>& done, int max_timeouts) {
  auto& s = sched();
  int fired = 0;
  while (!done()) {
    if (s.try_run_once()) {
      ++resumed_;
      // The coordinator resumes one message at a time but puts a still-busy actor back at the
      // front. Rotating it to the back gives every actor a turn per round, as threads would:
      // a rollouter's self-sent decode chunks interleave with everybody else's messages.
      if (s.jobs.size() > 1) {
        auto* job = s.jobs.front();
        s.jobs.pop_front();
        s.jobs.push_back(job);
      }
      continue;
    }
    if (fired++ >= max_timeouts || !s.trigger_timeout()) return done();
  }
  return true;
}

std::unique_ptr<loaded_config> tiny_run_config(const std::vector<std::string>& overrides) {
  std::vector<std::string> all{"model.init.hidden_size=32",
                               "model.init.intermediate_size=64",
                               "model.init.num_hidden_layers=2",
                               "model.init.num_attention_heads=4",
                               "model.init.num_key_value_heads=2",
                               "model.init.max_position_embeddings=64",
                               "model.init.init_std=0.1",
                               "data.arith.min_digits=1",
                               "data.arith.max_digits=2",
                               "data.train_size=64",
                               "data.test_size=8",
                               "data.train_batch_size=4",
                               "data.max_prompt_length=16",
                               "rollout.n=4",
                               "rollout.max_new_tokens=12",
                               "rollout.max_batch=8",
                               "rollout.chunk_tokens=2",
                               "rollout.threads=1",
                               "trainer.threads=1",
                               "trainer.micro_batch_size=4",
                               "trainer.lr=0.001",
                               "trainer.total_steps=3",
                               "runtime.log_level=error"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return load_config("", all);
}

run_outcome run_coordinated(const run_config& cfg) {
  temp_dir dir("actors");
  return run_coordinated(cfg, run_files{dir.path().string(), "", 0, std::nullopt});
}

namespace {

int64_t lines_in(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string line; std::getline(in, line);)
    ++n;
  return n;
}

}  // namespace

started_run start_coordinated_run(caf::actor_system& sys, const run_config& cfg,
                                  const run_files& files, const std::string& tag) {
  spdlog::set_level(spdlog::level::from_str(cfg.runtime.log_level));
  auto tok = char_tokenizer::builtin();
  auto mcfg = model_config::from_init(cfg.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id());
  auto model = init_causal_lm(mcfg, cfg.model.init.init_std,
                              static_cast<uint64_t>(cfg.runtime.seed), torch::kCPU);
  arith_options ao;
  ao.min_digits = static_cast<int>(cfg.data.arith.min_digits);
  ao.max_digits = static_cast<int>(cfg.data.arith.max_digits);
  auto data = generate_arith_splits(ao, static_cast<size_t>(cfg.data.train_size),
                                    static_cast<size_t>(cfg.data.test_size),
                                    static_cast<uint64_t>(cfg.data.seed));
  controller_args ca;
  ca.env = make_env(make_role_params(cfg), mcfg, std::make_shared<char_tokenizer>(tok),
                    /*detached=*/false);
  ca.initial = snapshot_weights(*model, 0);
  ca.train = data.train;
  ca.test = data.test;
  ca.run_dir = files.run_dir;
  ca.show_progress = false;
  ca.checkpoint_dir = files.checkpoint_dir;
  ca.config_yaml = tag;
  ca.resume = files.resume;
  started_run out{caf::actor_cast<caf::actor>(spawn_controller(sys, ca)),
                  std::make_shared<std::optional<run_result>>()};
  auto ctrl = caf::actor_cast<controller_actor>(out.ctrl);
  auto result = out.result;
  sys.spawn([ctrl, result](caf::event_based_actor* self) {
    self->request(ctrl, caf::infinite, run_atom::value)
        .then([result](run_result& r) { *result = std::move(r); },
              [result](caf::error& e) {
                run_result r;
                r.ok = false;
                r.error = to_string(e);
                *result = std::move(r);
              });
  });
  return out;
}

run_outcome run_coordinated(const run_config& cfg, run_files files) {
  run_outcome out;
  const std::string metrics = files.run_dir + "/metrics.jsonl";
  {
    coordinated_system cs;
    auto run = start_coordinated_run(cs.sys(), cfg, files, "coordinated test run");
    const auto ctrl = run.ctrl;
    const auto result = run.result;
    if (files.interrupt_at_step > 0) {
      // The metrics line of a step is written when its report arrives: interrupt right then.
      cs.run_until(
          [&] { return result->has_value() || lines_in(metrics) >= files.interrupt_at_step; });
      if (!result->has_value()) caf::anon_send(ctrl, interrupt_atom::value);
    }
    out.finished = cs.run_until([&] { return result->has_value(); });
    out.messages = cs.resumed();
    if (out.finished) {
      out.result = std::move(**result);
      cs.run_until([] { return false; }, 0);  // let every role finish quitting
    } else {
      caf::anon_send_exit(ctrl, caf::exit_reason::kill);  // takes the linked roles down
      cs.run_until([] { return false; }, 0);
    }
  }
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);)
    out.metrics.push_back(line);
  return out;
}

}  // namespace asyncrl::test

#include "tests/role_fakes.hpp"
#include "runtime/text/char_tokenizer.hpp"

#include <caf/all.hpp>

#include <memory>
#include <utility>

namespace asyncrl::test {

env_ptr tiny_env(const std::vector<std::string>& overrides) {
  auto lc = tiny_run_config(overrides);
  auto tok = char_tokenizer::builtin();
  return make_env(
      make_role_params(lc->cfg),
      model_config::from_init(lc->cfg.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id()),
      std::make_shared<char_tokenizer>(tok), /*detached=*/false);
}

scored_group one_sample_group(uint64_t id, int64_t version) {
  scored_group g;
  g.group_id = id;
  scored_sample s;
  s.prompt = {1, 5};
  s.response = {7};
  s.logprobs = {-1.f};
  s.versions = {version};
  g.samples.push_back(s);
  return g;
}

// Each fake keeps one shared copy of its hooks: a hook may carry state (a counter, held
// promises) that every handler must see the same.

controller_actor fake_controller(coordinated_system& cs, controller_hooks hooks) {
  auto h = std::make_shared<const controller_hooks>(std::move(hooks));
  return cs.track(cs.sys().spawn([h](controller_actor::pointer) -> controller_actor::behavior_type {
    return {
        [](run_atom) -> run_result { return {}; },
        [h](prompts_atom, int64_t n) {
          return h->prompts ? h->prompts(n) : std::vector<prompt_task>{};
        },
        [h](dropped_atom, uint64_t id, bool regenerate) {
          if (h->dropped) h->dropped(id, regenerate);
        },
        [](progress_atom, rollout_progress&) {},
        [h](report_atom, step_report& r) {
          if (h->report) h->report(r);
        },
        [h](checkpoint_atom, trainer_checkpoint& c) {
          if (h->checkpoint) h->checkpoint(c);
        },
        [](done_atom) {},
        [](activity_atom, trainer_status&) {},
        [](activity_atom, sync_status&) {},
        [h](fail_atom, std::string& why) {
          if (h->fail) h->fail(why);
        },
        [](interrupt_atom) {},
        [](requeue_atom, int32_t, caf::actor_addr&) {},
        [](join_atom, join_request&) -> caf::result<join_reply> { return join_reply{}; },
        [](join_atom, rank_join_request&) -> caf::result<rank_setup> { return rank_setup{}; },
        [h](lost_atom, caf::actor& agent, std::string& why) {
          if (h->lost) h->lost(agent, why);
        },
        [](watchdog_atom) {},
        [](console_atom, console_request&) { return console_reply{}; },
    };
  }));
}

namespace {

// The fake queue's behaviour, for the test coordinator and for a real actor system alike.
queue_actor::behavior_type hooked_queue(queue_actor::pointer self,
                                        std::shared_ptr<const queue_hooks> h) {
  return {
      [=](credit_atom, int32_t worker, int64_t want) -> caf::result<int64_t> {
        if (h->credit) return h->credit(self, worker, want);
        return int64_t{0};
      },
      [](abandon_atom, int32_t, int64_t) {},
      [h](put_atom, scored_group& g) {
        if (h->put) h->put(std::move(g));
      },
      [=](pull_atom, int64_t version, int64_t min, int64_t max) -> caf::result<delivery> {
        if (h->pull) return h->pull(self, version, min, max);
        return delivery{};
      },
      [h](refill_atom, int64_t filtered, int64_t replace) {
        if (h->refill) h->refill(filtered, replace);
      },
      [](started_atom, int32_t, uint64_t, int64_t) {},
      [h](synced_atom, int64_t version) {
        if (h->synced) h->synced(version);
      },
      [](lost_atom, int32_t, int64_t, caf::actor_addr&) {},
      [](snapshot_atom) -> delivery { return {}; },
      [](members_atom, int32_t) {},
      [](set_atom, admission_params&) {},
      [](hold_atom, bool) {},
      [](stats_atom) -> queue_stats { return {}; },
      [](stop_atom, int64_t) -> queue_stats { return {}; },
  };
}

}  // namespace

queue_actor fake_queue(coordinated_system& cs, queue_hooks hooks) {
  auto h = std::make_shared<const queue_hooks>(std::move(hooks));
  return cs.track(cs.sys().spawn([h](queue_actor::pointer self) -> queue_actor::behavior_type {
    return hooked_queue(self, h);
  }));
}

queue_actor forwarding_queue(caf::actor_system& sys, caf::actor sink) {
  queue_hooks hooks;
  hooks.put = [sink](scored_group g) { caf::anon_send(sink, put_atom::value, std::move(g)); };
  auto h = std::make_shared<const queue_hooks>(std::move(hooks));
  return sys.spawn([h](queue_actor::pointer self) -> queue_actor::behavior_type {
    return hooked_queue(self, h);
  });
}

synchronizer_actor fake_synchronizer(coordinated_system& cs, sync_hooks hooks) {
  auto h = std::make_shared<const sync_hooks>(std::move(hooks));
  return cs.track(
      cs.sys().spawn([h](synchronizer_actor::pointer) -> synchronizer_actor::behavior_type {
        return {
            [h](publish_atom, weight_snapshot& w) {
              if (h->publish) return h->publish(w);
              sync_report r;
              r.version = w.version;
              r.ok = true;
              return r;
            },
            [](respawn_atom, int32_t) -> caf::result<caf::actor> { return caf::actor{}; },
            [](join_atom, caf::actor, int32_t, int32_t) -> caf::result<std::vector<caf::actor>> {
              return std::vector<caf::actor>{};
            },
            [](leave_atom, std::vector<int32_t>&) {},
            [](retry_atom) {},
            [](stage_atom, int64_t, std::string&) {},
            [](stop_atom) -> caf::result<int64_t, int64_t> {
              return {int64_t{0}, int64_t{0}};
            },
        };
      }));
}

rollouter_actor fake_rollouter(coordinated_system& cs, rollouter_hooks hooks) {
  auto h = std::make_shared<const rollouter_hooks>(std::move(hooks));
  return cs.track(
      cs.sys().spawn([h](rollouter_actor::pointer self) -> rollouter_actor::behavior_type {
        // A hung pause's promises are kept, never delivered: the requester waits until its
        // deadline.
        auto held = std::make_shared<std::vector<caf::typed_response_promise<int64_t>>>();
        return {
            [](start_atom) {},
            [](gen_atom) {},
            [=](pause_atom, int64_t token) -> caf::result<int64_t> {
              if (h->pause) h->pause(token);
              if (!h->hang) return int64_t{0};
              held->push_back(self->make_response_promise<int64_t>());
              return held->back();
            },
            [h](load_atom, weight_snapshot& w) -> int64_t {
              if (h->load) h->load(w);
              return w.version;
            },
            [h](resume_atom, int64_t token) {
              if (h->resume) h->resume(token);
            },
            [](apply_atom) {},
            [](set_atom, double) {},
            [](delay_atom, int64_t) {},
            [self](stop_atom) -> rollout_counts {
              self->quit();
              return {};
            },
        };
      }));
}

}  // namespace asyncrl::test

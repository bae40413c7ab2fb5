#include "actors/controller_views.hpp"

#include <algorithm>
#include <string>

namespace asyncrl {

using json = nlohmann::ordered_json;

json console_rollouters_view(const controller_state& st) {
  const auto in_flight = st.ledger.in_flight_by_worker();
  json rs = json::array();
  for (auto& [w, r] : st.roster.live()) {
    json x{{"id", w}, {"where", st.roster.where(w)}, {"device", st.roster.device(w)}};
    const auto& progress = st.roster.progress();
    if (auto p = progress.find(w); p != progress.end()) {
      x["state"] = to_string(p->second.state);
      x["weight_version"] = p->second.version;
      x["tokens_generated"] = p->second.tokens_generated;
      x["groups_completed"] = p->second.groups_completed;
      x["busy_ms"] = p->second.busy_ms;
    } else {
      x["state"] = "starting";
    }
    auto f = in_flight.find(w);
    x["prompts_in_flight"] = f == in_flight.end() ? 0 : f->second;
    rs.push_back(std::move(x));
  }
  return rs;
}

json console_status_view(const controller_state& st, const queue_stats* q,
                         const reward_counts* rc) {
  json j;
  j["run"] = {{"mode", to_string(st.args.env->params.controller.mode)},
              {"state", st.shutting_down() ? "stopping"
                        : st.paused        ? "paused"
                                           : "running"},
              {"step", st.watch.last_step()},
              {"total_steps", st.args.env->plan.total_steps},
              {"wall_time_s", st.wall_s()}};
  // What the trainer is doing: an end it reported, or as the queue sees it, a pull waiting for
  // groups or none (it is computing a step).
  std::string trainer_state = "training";
  if (st.reported.trainer.phase != trainer_phase::training)
    trainer_state = to_string(st.reported.trainer.phase);
  else if (st.shutting_down())
    trainer_state = "stopping";
  else if (q && q->pull_waiting_min > 0)
    trainer_state = "waiting for " + std::to_string(q->pull_waiting_min) + " group(s)";
  json tr{{"state", trainer_state}, {"step", st.watch.last_step()}};
  json ranks = json::array();
  for (size_t r = 0; r < st.roster.rank_devices().size(); ++r)
    ranks.push_back({{"rank", r}, {"device", st.roster.rank_devices()[r]}});
  tr["ranks"] = std::move(ranks);
  if (st.last_report) {
    tr["policy_version"] = st.last_report->policy_version;
    tr["prox_version"] = st.last_report->prox_version;
    tr["last_step_stale_samples"] = st.last_report->stale_samples;
  }
  j["trainer"] = tr;
  j["rollouters"] = console_rollouters_view(st);
  // As the synchronizer last reported: idle, syncing or joining, and the version it moves.
  j["synchronizer"] = {{"state", to_string(st.reported.sync.activity)},
                       {"weights_version", st.reported.sync.version}};
  if (rc)
    j["reward"] = {{"state", rc->in_progress > 0 ? "scoring" : "idle"},
                   {"groups_scoring", rc->in_progress}};
  if (q) {
    j["weights"] = {{"published_version", q->published_version}};
    j["queue"] = {{"depth", q->depth},
                  {"running", q->running},
                  {"capacity", q->capacity},
                  {"window_budget", q->window_budget},
                  {"admitted_in_window", q->admitted_in_window},
                  {"carried", q->carried},
                  {"held", q->held},
                  {"admission_limit", q->admission_limit},
                  {"received", q->received},
                  {"delivered", q->delivered},
                  {"dropped_stale", q->dropped_stale},
                  {"lost", q->lost}};
  }
  const auto& live =
      (st.live_cfg ? st.live_cfg->params() : st.args.env->params).trainer.schedule.async_training;
  j["staleness"] = {{"max_staleness", live.max_staleness},
                    {"staleness_threshold", live.staleness_threshold},
                    {"max_delivered", q ? q->max_delivered_staleness : -1}};
  // Prompts, as the ledger counts them: every schedule position handed out (dispatched) is
  // trained (or filtered), dropped, in flight, or waiting to be generated again.
  const auto dispatched = static_cast<int64_t>(st.loader.dispatched());
  const auto trained = static_cast<int64_t>(st.ledger.trained_seqs().size());
  const auto dropped = static_cast<int64_t>(st.ledger.dropped_seqs().size());
  const auto in_flight = static_cast<int64_t>(st.ledger.in_flight());
  const auto retry = static_cast<int64_t>(st.loader.waiting().size());
  // Where the prompts in flight are: being generated at a rollouter, scored by the Reward,
  // queued, or with the trainer (consumed into its open step, or buffered): what the others
  // leave, exact once the run is still (a group on its way between two roles counts there).
  // A pause holds admission at once, so a step whose groups are partly in stays open with them
  // until resume: without this count they showed as in flight on idle rollouters.
  int64_t generating = 0;
  for (auto& [w, n] : st.ledger.in_flight_by_worker())
    generating += n;
  const int64_t with_trainer =
      q && rc ? std::max<int64_t>(0, in_flight - generating - rc->in_progress - q->depth) : -1;
  j["in_flight"] = {{"prompts", in_flight},
                    {"to_regenerate", retry},
                    {"generating", generating},
                    {"scoring_groups", rc ? rc->in_progress : -1},
                    {"queued_groups", q ? q->depth : -1},
                    {"trainer_groups", with_trainer}};
  j["accounting"] = {
      {"dispatched", dispatched}, {"trained", trained},
      {"dropped", dropped},       {"in_flight", in_flight},
      {"to_regenerate", retry},   {"holds", dispatched == trained + dropped + in_flight + retry}};
  return j;
}

json console_workers_view(const controller_state& st, const reward_counts& rc,
                          const std::vector<int64_t>& load) {
  json ws = json::array();
  for (size_t i = 0; i < load.size(); ++i)
    ws.push_back({{"slot", i}, {"where", "local"}, {"calls_in_flight", load[i]}});
  return json{{"rollouters", console_rollouters_view(st)},
              {"reward_workers", ws},
              {"reward",
               {{"received", rc.received},
                {"forwarded", rc.forwarded},
                {"in_progress", rc.in_progress},
                {"failures", rc.failures},
                {"timeouts", rc.timeouts},
                {"worker_restarts", rc.worker_restarts}}}};
}

json console_metrics_view(const controller_state& st, int64_t n) {
  json steps = json::array();
  for (auto& line : st.metrics.recent(n))
    steps.push_back(json::parse(line));
  return json{{"steps", steps}};
}

}  // namespace asyncrl

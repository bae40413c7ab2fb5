#include "apps/asyncrl/repl_render.hpp"

#include <fmt/format.h>

#include <map>
#include <vector>

namespace asyncrl {

namespace {

using json = nlohmann::ordered_json;

std::string str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "-";
  if (v.is_number_float()) return fmt::format("{:.4g}", v.get<double>());
  return v.dump();
}

std::string field(const json& o, const char* k) {
  return o.contains(k) ? str(o[k]) : "-";
}

// Columns padded to their widest cell.
std::string table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    w[c] = head[c].size();
    for (auto& r : rows)
      w[c] = std::max(w[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string s = " ";
    for (size_t c = 0; c < cells.size(); ++c)
      s += " " + cells[c] + std::string(w[c] - cells[c].size() + 1, ' ');
    while (!s.empty() && s.back() == ' ')
      s.pop_back();
    return s + "\n";
  };
  std::string s = line(head);
  for (auto& r : rows)
    s += line(r);
  return s;
}

std::string rollouter_table(const json& rs) {
  std::vector<std::vector<std::string>> rows;
  for (auto& r : rs)
    rows.push_back({field(r, "id"), field(r, "where"), field(r, "state"),
                    field(r, "weight_version"), field(r, "tokens_generated"),
                    field(r, "groups_completed"), field(r, "prompts_in_flight")});
  return table({"ID", "WHERE", "STATE", "VERSION", "TOKENS", "GROUPS", "IN-FLIGHT"}, rows);
}

std::string render_status(const json& j) {
  const auto& run = j["run"];
  std::string s =
      fmt::format("run: {}, {}, step {}/{}, {:.1f} s\n", field(run, "mode"), field(run, "state"),
                  field(run, "step"), field(run, "total_steps"), run.value("wall_time_s", 0.0));
  const auto& t = j["trainer"];
  s += fmt::format(
      "trainer: {}, step {}, policy v{}, proximal v{}, stale samples in its last step {}\n",
      field(t, "state"), field(t, "step"), field(t, "policy_version"), field(t, "prox_version"),
      field(t, "last_step_stale_samples"));
  s += "synchronizer: " + field(j["synchronizer"], "state");
  if (j.contains("reward"))
    s += "; reward: " + field(j["reward"], "state") + " (" + field(j["reward"], "groups_scoring") +
         " groups)";
  s += "\n";
  if (j.contains("weights"))
    s += "weights: published v" + field(j["weights"], "published_version") + "\n";
  s += "rollouters:\n" + rollouter_table(j["rollouters"]);
  if (j.contains("queue")) {
    const auto& q = j["queue"];
    s += fmt::format(
        "queue: depth {}, generating or scoring {}, capacity {}, window {}/{} (carried {}), "
        "admission {}{}\n",
        field(q, "depth"), field(q, "running"), field(q, "capacity"),
        field(q, "admitted_in_window"), field(q, "window_budget"), field(q, "carried"),
        q.value("held", false) ? "held (paused)" : "open",
        q.value("admission_limit", std::string()).empty()
            ? ""
            : ", limited by " + q["admission_limit"].get<std::string>());
    s += fmt::format("groups: received {}, delivered {}, dropped as stale {}, lost {}\n",
                     field(q, "received"), field(q, "delivered"), field(q, "dropped_stale"),
                     field(q, "lost"));
  }
  const auto& st = j["staleness"];
  s += fmt::format("staleness: max_staleness {}, staleness_threshold {}, max delivered {}\n",
                   field(st, "max_staleness"), field(st, "staleness_threshold"),
                   field(st, "max_delivered"));
  const auto& f = j["in_flight"];
  // Paused, the groups with the trainer are an open step that waits for the groups admission
  // holds back: they are neither lost nor stuck at a rollouter.
  const bool waits = field(run, "state") == "paused" && f.value("trainer_groups", 0) > 0;
  s += fmt::format(
      "in flight: {} prompts ({} generating, {} groups scoring, {} queued, {} with the trainer{}), "
      "{} to regenerate\n",
      field(f, "prompts"), field(f, "generating"), field(f, "scoring_groups"),
      field(f, "queued_groups"), field(f, "trainer_groups"),
      waits ? ": its open step waits for resume" : "", field(f, "to_regenerate"));
  const auto& a = j["accounting"];
  s += fmt::format(
      "accounting: dispatched {} = trained {} + dropped {} + in flight {} + to regenerate {} "
      "({})\n",
      field(a, "dispatched"), field(a, "trained"), field(a, "dropped"), field(a, "in_flight"),
      field(a, "to_regenerate"), a.value("holds", false) ? "holds" : "VIOLATED");
  return s;
}

std::string render_metrics(const json& j) {
  const char* cols[] = {"step",          "reward_mean", "accuracy",    "loss",         "lr",
                        "stale_samples", "queue_depth", "step_time_s", "eval_accuracy"};
  std::vector<std::string> head(std::begin(cols), std::end(cols));
  std::vector<std::vector<std::string>> rows;
  for (auto& m : j["steps"]) {
    rows.emplace_back();
    for (auto* c : cols)
      rows.back().push_back(field(m, c));
  }
  if (rows.empty()) return "no step has completed yet\n";
  return table(head, rows);
}

std::string render_workers(const json& j) {
  std::string s = "rollouters:\n" + rollouter_table(j["rollouters"]);
  std::vector<std::vector<std::string>> rows;
  for (auto& w : j["reward_workers"])
    rows.push_back({field(w, "slot"), field(w, "where"), field(w, "calls_in_flight")});
  s += "reward workers:\n" + table({"SLOT", "WHERE", "CALLS-IN-FLIGHT"}, rows);
  const auto& r = j["reward"];
  s += fmt::format(
      "reward: received {}, forwarded {}, scoring {}, failures {}, timeouts {}, "
      "worker restarts {}\n",
      field(r, "received"), field(r, "forwarded"), field(r, "in_progress"), field(r, "failures"),
      field(r, "timeouts"), field(r, "worker_restarts"));
  return s;
}

std::string render_fields(const json& j) {
  std::string s;
  for (auto& [k, v] : j.items())
    s += k + ": " + str(v) + "\n";
  return s;
}

}  // namespace

std::string render_reply(console_cmd cmd, const json& result) {
  switch (cmd) {
    case console_cmd::status:
      return render_status(result);
    case console_cmd::metrics:
      return render_metrics(result);
    case console_cmd::workers:
      return render_workers(result);
    case console_cmd::get:
      return field(result, "key") + " = " + field(result, "value") +
             (result.value("live", false) ? "  (live-settable)\n" : "\n");
    case console_cmd::generate:
      return field(result, "response") + "\n  (" + field(result, "tokens") + " tokens, " +
             field(result, "finish") + ", policy v" + field(result, "policy_version") + ")\n";
    default:
      return render_fields(result);
  }
}

std::string status_line(const json& j) {
  const auto& run = j["run"];
  std::map<std::string, int> states;
  for (auto& r : j["rollouters"])
    ++states[r.value("state", std::string("?"))];
  std::string rs;
  for (auto& [k, n] : states)
    rs += fmt::format("{}{} {}", rs.empty() ? "" : ", ", n, k);
  const auto q = j.contains("queue") ? j["queue"] : json::object();
  return fmt::format(
      "step {}/{} | {} | policy v{} | queue {} | max stale {} | in flight {} | "
      "rollouters: {} | accounting {}",
      field(run, "step"), field(run, "total_steps"), field(run, "state"),
      field(j["trainer"], "policy_version"), field(q, "depth"),
      field(j["staleness"], "max_delivered"), field(j["in_flight"], "prompts"),
      rs.empty() ? "none" : rs, j["accounting"].value("holds", false) ? "ok" : "VIOLATED");
}

}  // namespace asyncrl

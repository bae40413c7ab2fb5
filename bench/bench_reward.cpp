// Reward throughput: responses per second scored by the built-in rule (score_response) and by
// the reference external scorer (examples/reward/gsm8k_scorer.py, Python + msgpack), on the
// same GSM8K-like responses (~200 bytes of worked answer ending in "#### N" or "\boxed{N}",
// half right) and a ~120-byte prompt.
//   direct:  one thread calls score_response / one external_scorer (stdio, then a Unix socket
//            to the reference's --socket server) in a loop;
//   actor:   the Reward actor (spawn_reward) on a threaded actor system, as in a run: groups of
//            G responses sent to it, time until all of them came out scored (math: workers on
//            the scheduler; external: detached workers, each with its own scorer process), with
//            reward.num_workers = 1 and 2.
// Median of --reps runs; one warm-up call per scorer (process start) is not timed.
//   build/bench/bench_reward [--responses 4000] [--builtin-responses 200000] [--group-size 8]
//                            [--reps 3] [--python /usr/bin/python3] [--scorer PATH] [--quick]
//                            [--out FILE]

#include <caf/all.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <random>

#include "actors/env.hpp"
#include "actors/reward.hpp"
#include "bench/bench_util.hpp"
#include "messages/type_ids.hpp"
#include "runtime/task/external_scorer.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/text/char_tokenizer.hpp"
#include "tests/role_fakes.hpp"

using namespace asyncrl;

namespace {

struct item {
  std::string prompt, response, truth;
};

std::vector<item> make_items(int n) {
  std::mt19937 rng(7);
  std::vector<item> out;
  for (int i = 0; i < n; ++i) {
    const int a = static_cast<int>(rng() % 900 + 100), b = static_cast<int>(rng() % 900 + 100);
    const int truth = a * 3 + b;
    const int answer = (i % 2 == 0) ? truth : truth + 1;
    item it;
    it.prompt = "Question: A farmer has " + std::to_string(a) +
                " rows of 3 apple trees and then plants " + std::to_string(b) +
                " more trees. How many trees are there now?\nAnswer:";
    it.response = "There are " + std::to_string(a) + " rows with 3 trees each, so " +
                  std::to_string(a) + " * 3 = " + std::to_string(a * 3) +
                  " trees. After planting " + std::to_string(b) + " more, the total is " +
                  std::to_string(a * 3) + " + " + std::to_string(b) + " = " +
                  std::to_string(answer) + ". ";
    it.response += (i % 4 < 2) ? "#### " + std::to_string(answer)
                               : "The answer is \\boxed{" + std::to_string(answer) + "}.";
    it.truth = std::to_string(truth);
    out.push_back(std::move(it));
  }
  return out;
}

double builtin_direct(const std::vector<item>& items, int64_t n, double* checksum) {
  const double t0 = bench::now_s();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& it = items[static_cast<size_t>(i) % items.size()];
    sum += score_response(it.response, it.truth);
  }
  const double dt = bench::now_s() - t0;
  *checksum = sum;
  return static_cast<double>(n) / dt;
}

// One client, sequential calls; returns responses/s (and fails loudly on any non-ok call).
double external_direct(external_scorer& s, const std::vector<item>& items, int64_t n, uint64_t* uid,
                       double* checksum) {
  const double t0 = bench::now_s();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    const auto& it = items[static_cast<size_t>(i) % items.size()];
    scorer_request r;
    r.uid = (*uid)++;
    r.prompt = it.prompt;
    r.response = it.response;
    r.ground_truth = it.truth;
    r.extra = {{"group_id", int64_t{0}}, {"prompt_index", int64_t{0}}, {"index", int64_t{0}}};
    auto got = s.score(r);
    if (got.outcome != scorer_outcome::ok) {
      std::cerr << "bench_reward: " << got.error << "\n";
      std::exit(1);
    }
    sum += got.score;
  }
  const double dt = bench::now_s() - t0;
  *checksum = sum;
  return static_cast<double>(n) / dt;
}

// The reference scorer serving a Unix socket; killed and reaped by the destructor.
struct socket_server {
  pid_t pid = -1;
  std::string dir, path;
  socket_server(const std::string& python, const std::string& scorer) {
    char tmpl[] = "/tmp/asyncrl-bench-XXXXXX";
    if (!::mkdtemp(tmpl)) return;
    dir = tmpl;
    path = dir + "/scorer.sock";
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], STDOUT_FILENO);
      const char* argv[] = {python.c_str(), scorer.c_str(), "--socket", path.c_str(), nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(out[1]);
    std::string line;  // "listening on PATH\n" once it accepts connections
    while (line.find('\n') == std::string::npos) {
      pollfd p{out[0], POLLIN, 0};
      char buf[256];
      if (::poll(&p, 1, 30000) <= 0) break;
      const auto n = ::read(out[0], buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    ::close(out[0]);
  }
  ~socket_server() {
    if (pid > 0) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

env_ptr make_bench_env(const std::vector<std::string>& overrides) {
  auto lc = load_config("", overrides);
  auto tok = char_tokenizer::builtin();
  return make_env(
      make_role_params(lc->cfg),
      model_config::from_init(lc->cfg.model.init, tok.vocab_size(), tok.bos_id(), tok.eos_id()),
      std::make_shared<char_tokenizer>(tok), /*detached=*/true);
}

struct actor_run {
  double responses_per_s = 0;
  double reward_sum = 0;
  int64_t failures = 0;
};

// Groups of G built from `items`, all sent at once; timed until the last one came out. The
// first group (which starts the scorer processes) is sent and awaited before the clock starts.
actor_run run_actor(const env_ptr& env, const std::vector<item>& items, int64_t groups, int G) {
  caf::actor_system_config cfg;
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 1);  // a run's cooperative roles share one thread
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto queue = test::forwarding_queue(sys, caf::actor_cast<caf::actor>(self));
  auto reward = spawn_reward(sys, reward_args{env, queue});
  auto group = [&](uint64_t id) {
    scored_group g;
    g.group_id = id;
    const auto& first = items[(id * G) % items.size()];
    g.ground_truth = first.truth;
    for (int k = 0; k < G; ++k) {
      const auto& it = items[(id * G + static_cast<uint64_t>(k)) % items.size()];
      scored_sample s;
      s.uid = id * G + static_cast<uint64_t>(k);
      s.group_id = id;
      s.index = static_cast<uint32_t>(k);
      s.prompt = env->tokenizer->encode(first.prompt);
      s.response = env->tokenizer->encode(it.response);
      g.samples.push_back(std::move(s));
    }
    return g;
  };
  auto await = [&](int64_t n, actor_run* r) {
    for (int64_t i = 0; i < n; ++i) {
      bool late = false;
      self->receive(
          [&](put_atom, scored_group& g) {
            for (const auto& s : g.samples) {
              r->reward_sum += s.reward;
              r->failures += s.reward_failed;
            }
          },
          caf::after(std::chrono::seconds(120)) >> [&] { late = true; });
      if (late) {
        std::cerr << "bench_reward: a group did not arrive within 120 s\n";
        std::exit(1);
      }
    }
  };
  actor_run warm, r;
  const int64_t workers = env->params.reward.reward.num_workers;
  for (int64_t i = 0; i < workers; ++i)  // one group per worker: every scorer is started
    self->send(reward, score_atom::value, group(static_cast<uint64_t>(i)));
  await(workers, &warm);
  const double t0 = bench::now_s();
  for (int64_t i = 0; i < groups; ++i)
    self->send(reward, score_atom::value, group(static_cast<uint64_t>(workers + i)));
  await(groups, &r);
  const double dt = bench::now_s() - t0;
  r.responses_per_s = static_cast<double>(groups * G) / dt;
  self->request(reward, std::chrono::seconds(120), stop_atom::value, workers + groups)
      .receive([](reward_counts&) {}, [](caf::error&) {});
  caf::anon_send_exit(queue, caf::exit_reason::user_shutdown);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = bench::flag(argc, argv, "--quick");
  const int64_t n_ext = std::stoll(bench::arg(argc, argv, "--responses", quick ? "800" : "4000"));
  const int64_t n_builtin =
      std::stoll(bench::arg(argc, argv, "--builtin-responses", quick ? "20000" : "200000"));
  const int G = std::stoi(bench::arg(argc, argv, "--group-size", "8"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", quick ? "1" : "3"));
  const std::string python = bench::arg(argc, argv, "--python", "/usr/bin/python3");
  const std::string scorer =
      bench::arg(argc, argv, "--scorer",
                 (std::filesystem::path(__FILE__).parent_path().parent_path() / "examples" /
                  "reward" / "gsm8k_scorer.py")
                     .string());
  const auto items = make_items(1000);
  const std::string command = python + " " + scorer;

  // Direct calls.
  std::vector<double> builtin_s, stdio_s, socket_s;
  double builtin_sum = 0, stdio_sum = 0, socket_sum = 0;
  uint64_t uid = 0;
  {
    external_scorer_options o;
    o.command = split_command(command);
    external_scorer stdio(o);
    external_direct(stdio, items, 1, &uid, &stdio_sum);  // start the process
    socket_server server(python, scorer);
    external_scorer_options so;
    so.socket = server.path;
    external_scorer sock(so);
    external_direct(sock, items, 1, &uid, &socket_sum);  // connect
    for (int r = 0; r < reps; ++r) {
      builtin_s.push_back(builtin_direct(items, n_builtin, &builtin_sum));
      stdio_s.push_back(external_direct(stdio, items, n_ext, &uid, &stdio_sum));
      socket_s.push_back(external_direct(sock, items, n_ext, &uid, &socket_sum));
    }
  }

  // Through the Reward actor.
  const int64_t groups_ext = std::max<int64_t>(1, n_ext / G);
  const int64_t groups_builtin = std::max<int64_t>(1, n_builtin / 10 / G);
  nlohmann::ordered_json actor = nlohmann::ordered_json::object();
  for (int workers : {1, 2}) {
    const auto w = "reward.num_workers=" + std::to_string(workers);
    auto math = make_bench_env({w, "runtime.log_level=error"});
    auto ext = make_bench_env({w, "reward.function=external", "reward.external.command=" + command,
                               "runtime.log_level=error"});
    std::vector<double> m, e;
    int64_t failures = 0;
    double mean_m = 0, mean_e = 0;
    for (int r = 0; r < reps; ++r) {
      auto a = run_actor(math, items, groups_builtin, G);
      auto b = run_actor(ext, items, groups_ext, G);
      m.push_back(a.responses_per_s);
      e.push_back(b.responses_per_s);
      failures += a.failures + b.failures;
      mean_m = a.reward_sum / static_cast<double>(groups_builtin * G);
      mean_e = b.reward_sum / static_cast<double>(groups_ext * G);
    }
    actor[std::to_string(workers) + "_workers"] = {
        {"builtin_responses_per_s", bench::median(m)},
        {"external_stdio_responses_per_s", bench::median(e)},
        {"builtin_to_external_ratio", bench::median(m) / bench::median(e)},
        {"scoring_failures", failures},
        {"mean_reward_builtin", mean_m},
        {"mean_reward_external", mean_e},
        {"builtin_runs", m},
        {"external_runs", e}};
  }

  const double b = bench::median(builtin_s), st = bench::median(stdio_s),
               so = bench::median(socket_s);
  nlohmann::ordered_json j{
      {"benchmark", "reward_throughput"},
      {"machine", bench::machine()},
      {"scorer", command},
      {"responses_external", n_ext},
      {"responses_builtin", n_builtin},
      {"group_size", G},
      {"reps", reps},
      {"response_bytes_mean",
       [&] {
         double s = 0;
         for (const auto& it : items)
           s += static_cast<double>(it.response.size());
         return s / static_cast<double>(items.size());
       }()},
      {"method",
       "median responses/s over reps; direct = one thread calling score_response or one "
       "external_scorer (sequential round trips; process start or connect not timed); actor = "
       "spawn_reward on a threaded actor system (1 scheduler thread; external workers "
       "detached), groups of group_size sent at once, timed until all came out scored"},
      {"direct",
       {{"builtin_responses_per_s", b},
        {"external_stdio_responses_per_s", st},
        {"external_socket_responses_per_s", so},
        {"external_stdio_us_per_response", 1e6 / st},
        {"external_socket_us_per_response", 1e6 / so},
        {"builtin_to_external_stdio_ratio", b / st},
        {"mean_reward_builtin", builtin_sum / static_cast<double>(n_builtin)},
        {"mean_reward_external_stdio", stdio_sum / static_cast<double>(n_ext)},
        {"builtin_runs", builtin_s},
        {"external_stdio_runs", stdio_s},
        {"external_socket_runs", socket_s}}},
      {"actor", actor}};
  bench::emit(argc, argv, j);
  return 0;
}

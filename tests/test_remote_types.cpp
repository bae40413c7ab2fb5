// Every type of the asyncrl type-ID block (messages/type_ids.hpp), and the atom messages that
// cross nodes, go to another process and come back equal. CAF 0.17 does not fail on an
// unregistered type: it sends an empty message (or the peer cannot read it), which only a real
// process boundary shows. The far side is asyncrl_remote_echo (tests/remote_echo.cpp).
//
// A type added to the block without a sample here fails the test (the sample count and the set
// of covered type IDs are checked against caf::id_block::asyncrl).

#include <gtest/gtest.h>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/catch_all.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/io/middleman.hpp>
#include <caf/message.hpp>
#include <caf/message_view.hpp>
#include <caf/scoped_actor.hpp>
#include <caf/send.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "messages/type_ids.hpp"
#include "runtime/console/commands.hpp"
#include "tests/test_builders.hpp"

extern char** environ;

#ifndef ASYNCRL_REMOTE_ECHO
#error "ASYNCRL_REMOTE_ECHO (the path of asyncrl_remote_echo) must be defined"
#endif

namespace asyncrl {
namespace {

using test::make_queue_stats;
using test::make_step_report;

// The child process --------------------------------------------------------------------------

/// asyncrl_remote_echo with a pipe to its stdin and one from its stdout. The destructor closes
/// its stdin (the echo's signal to exit), kills it and reaps it, on every path out of a test.
class echo_process {
 public:
  echo_process() = default;
  echo_process(const echo_process&) = delete;
  echo_process& operator=(const echo_process&) = delete;
  ~echo_process() { stop(); }

  /// Starts the child; "" or why not.
  std::string start(const std::string& path) {
    int in[2] = {-1, -1}, out[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0) return std::string("pipe2: ") + std::strerror(errno);
    if (pipe2(out, O_CLOEXEC) != 0) {
      const int e = errno;
      close(in[0]), close(in[1]);
      return std::string("pipe2: ") + std::strerror(e);
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    // dup2 clears close-on-exec on 0 and 1; every other end of the pipes closes at exec.
    posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
    std::vector<char*> argv{const_cast<char*>(path.c_str()), nullptr};
    const int rc = posix_spawn(&pid_, path.c_str(), &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]), close(out[1]);
    to_child_ = in[1], from_child_ = out[0];
    if (rc != 0) {
      pid_ = -1;
      return "posix_spawn " + path + ": " + std::strerror(rc);
    }
    return {};
  }

  /// Reads one line from the child's stdout, waiting at most `limit` in all. "" on timeout or
  /// end of file (`why` says which).
  std::string read_line(std::chrono::milliseconds limit, std::string& why) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::string line;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        why = "no line from the child within " + std::to_string(limit.count()) + " ms";
        return {};
      }
      pollfd p{from_child_, POLLIN, 0};
      const int r = poll(&p, 1, static_cast<int>(left.count()));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) {
        why = std::string("poll: ") + std::strerror(errno);
        return {};
      }
      if (r == 0) continue;  // the deadline check above ends the loop
      char c = 0;
      const auto n = read(from_child_, &c, 1);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        why = "the child closed its stdout (exited?) after '" + line + "'";
        return {};
      }
      if (c == '\n') return line;
      line += c;
    }
  }

  void stop() {
    if (to_child_ >= 0) close(to_child_);  // end of file on the echo's stdin: it exits
    if (from_child_ >= 0) close(from_child_);
    to_child_ = from_child_ = -1;
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      pid_ = -1;
    }
  }

 private:
  pid_t pid_ = -1;
  int to_child_ = -1;
  int from_child_ = -1;
};

/// Stops a local actor when the test leaves (the actor_system's destructor waits for it).
struct actor_stopper {
  caf::actor handle;
  ~actor_stopper() { caf::anon_send_exit(handle, caf::exit_reason::user_shutdown); }
};

// Samples --------------------------------------------------------------------------------------

struct sample {
  std::string name;
  caf::message msg;
  caf::type_id_t block_id = 0;  // the asyncrl type this sample covers; 0 = an atom message
  // Checks the reply's element types (and, for weights, what to_string does not show).
  std::function<void(const caf::message&)> check;
};

// Bit-exact, and the receiver's blob must be its own (unpacked from the bytes that crossed).
void expect_same_weights(const weight_snapshot& a, const weight_snapshot& b) {
  EXPECT_EQ(a.version, b.version);
  ASSERT_EQ(a.blob == nullptr, b.blob == nullptr);
  if (!a.blob) return;
  EXPECT_NE(a.blob.get(), b.blob.get()) << "the blob came back by pointer, not by value";
  EXPECT_EQ(a.blob->names, b.blob->names);
  EXPECT_EQ(a.blob->shapes, b.blob->shapes);
  ASSERT_EQ(a.blob->data.size(), b.blob->data.size());
  if (!a.blob->data.empty()) {
    EXPECT_EQ(0, std::memcmp(a.blob->data.data(), b.blob->data.data(), a.blob->bytes()));
  }
}

template <class T>
struct non_deduced {
  using type = T;
};

class sample_list {
 public:
  /// One value of a type of the asyncrl block; `more` compares what to_string leaves out.
  template <class T>
  void type(T x, std::function<void(const typename non_deduced<T>::type&,
                                    const typename non_deduced<T>::type&)>
                     more = nullptr) {
    constexpr caf::type_id_t id = caf::type_id<T>::value;
    static_assert(id >= caf::id_block::asyncrl::begin && id < caf::id_block::asyncrl::end,
                  "not a type of the asyncrl block");
    sample s;
    s.name = caf::type_name<T>::value;
    s.block_id = id;
    s.msg = caf::make_message(x);
    s.check = [x = std::move(x), more](const caf::message& got) {
      ASSERT_TRUE(got.match_elements<T>()) << "reply: " << caf::to_string(got);
      if (more) more(x, got.get_as<T>(0));
    };
    list_.push_back(std::move(s));
  }

  /// A message of several elements, as the actors send them (an atom first).
  template <class Atom, class... Ts>
  void message(Atom atom, Ts... xs) {
    static_assert(caf::is_atom_constant<Atom>::value, "an atom first");
    sample s;
    s.name = "(" + caf::to_string(Atom::value) + ", " + std::to_string(sizeof...(Ts)) + " more)";
    s.msg = caf::make_message(atom, xs...);
    s.check = [](const caf::message& got) {
      EXPECT_TRUE((got.match_elements<Atom, Ts...>())) << "reply: " << caf::to_string(got);
    };
    list_.push_back(std::move(s));
  }

  const std::vector<sample>& list() const { return list_; }

 private:
  std::vector<sample> list_;
};

// Every field distinct from its default (and mostly from its neighbours). Floats and doubles
// outside weight blobs stay finite and normal: CAF 0.17.6 packs them with detail::pack754, which
// turns -0 into +0, NaN into 1 and subnormals into huge values, and loops forever on +-inf
// (weight blobs are msgpack bytes, so any float crosses bit-exactly there).
scored_sample make_sample(uint64_t k) {
  scored_sample s;
  s.uid = (1ULL << 63) + k, s.group_id = (1ULL << 40) + k, s.index = 7 + static_cast<uint32_t>(k);
  s.prompt = {11, -12, 13}, s.response = {21, 22, 23, 24}, s.versions = {3, 3, 4, 1LL << 35};
  s.logprobs = {-0.5f, -1.25f, -3e-8f, 0.0f}, s.reward = 0.75 + k, s.advantage = -1.5 - k;
  s.interruptions = 2 + static_cast<int32_t>(k), s.reward_failed = true;
  s.loss_mask = {1, 0, 0, 1}, s.turns = 3, s.env_failed = true, s.has_env_reward = true;
  s.env_reward = -0.25 - static_cast<double>(k);
  return s;
}

scored_group make_group(uint64_t k) {
  scored_group g;
  g.group_id = (1ULL << 41) + k, g.prompt_index = 900 + k, g.seq = 4000 + k;
  g.ground_truth = "\\boxed{42} \xe2\x88\x9a", g.filtered = true, g.worker = 3;
  g.samples = {make_sample(k), make_sample(k + 1)};
  return g;
}

prompt_task make_prompt(uint64_t k) {
  return {(1ULL << 62) + k, 77 + k, (1ULL << 45) + k, {1, -2, 3, 40000}, "ground \"truth\"\n"};
}

std::shared_ptr<const weight_blob> make_blob(float scale) {
  auto b = std::make_shared<weight_blob>();
  b->names = {"embed.weight", "layers.0.attn.qkv", "scale", "empty"};
  b->shapes = {{3, 4}, {5}, {}, {2, 0, 7}};  // 12 + 5 + 1 + 0 floats
  b->resize(18);
  float* f = b->floats();
  for (int i = 0; i < 18; ++i)
    f[i] = scale * static_cast<float>(i) - 0.7f;
  uint32_t nan_bits = 0x7fc01234u;  // a quiet NaN with a payload
  std::memcpy(&f[0], &nan_bits, sizeof nan_bits);
  f[1] = -0.0f;
  f[2] = std::numeric_limits<float>::infinity();
  f[3] = std::numeric_limits<float>::denorm_min();
  return b;
}

trainer_checkpoint make_trainer_checkpoint() {
  trainer_checkpoint c;
  c.step = 41, c.steps_in_sync = 2, c.prox_version = 40, c.eval_time_s = 3.25;
  c.counts = {61, 62, 63, 64, 65, 66, 67, 68};
  c.held = {make_group(9)};
  c.state = std::string("opt\0state\xff", 10);
  c.rollout_weights = {41, make_blob(0.5f)};
  return c;
}

loader_state make_loader_state() {
  return {3, 1ULL << 33, (1ULL << 42) + 1, 12345, {make_prompt(1), make_prompt(2)}};
}

run_state make_run_state() {
  run_state r;
  r.step = 41, r.trainer = make_trainer_checkpoint(), r.loader = make_loader_state();
  r.queued = {make_group(11), make_group(12)}, r.queue = make_queue_stats();
  r.reward = {51, 52, 53, 54, 55, 56, 57, 151, 152, 153, 154, 155, 156}, r.groups_generated = 70,
  r.tokens_generated = 71;
  r.tokens_trained = 72, r.syncs = 73, r.rollouter_restarts = 74, r.wall_time_s = 75.5;
  r.trained_seqs = {1, 2, 1ULL << 60}, r.dropped_seqs = {7};
  return r;
}

run_result make_run_result() {
  run_result r;
  r.ok = false, r.status = run_status::interrupted, r.error = "trainer died";
  r.resumed_from_step = 42, r.checkpoints = 43, r.checkpoint = "runs/x/step-00000044.ckpt";
  r.checkpoint_step = 44, r.rollouter_restarts = 45, r.sync_retries = 46;
  r.remote_rollouters_joined = 47, r.remote_rollouters_lost = 48, r.restartable = true;
  r.steps = 31, r.groups_generated = 32, r.groups_trained = 33, r.groups_dropped = 34;
  r.groups_in_flight = 35, r.groups_filtered = 36, r.tokens_generated = 37;
  r.tokens_trained = 38, r.syncs = 39, r.wall_time_s = 40.25, r.train_time_s = 41.5;
  r.rollouters = {{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}},
  r.reward = {51, 52, 53, 54, 55, 56, 57, 151, 152, 153, 154, 155, 156};
  r.queue = make_queue_stats(), r.trainer = {61, 62, 63, 64, 65, 66, 67, 68};
  r.final_weights = {17, make_blob(0.25f)};
  return r;
}

weight_chunk make_chunk() {
  weight_chunk c;
  c.version = 9, c.index = 2, c.count = 5, c.offset = 1LL << 32, c.total_bytes = (1LL << 33) + 3;
  c.digest = std::string(64, 'a');
  c.bytes = {'\0', '\x01', '\x7f', '\x80', '\xff', 'x'};
  return c;
}

// `local` is an actor of this process, `remote` the echo's proxy: handles in the payloads go
// out and come back as the same actors.
sample_list make_samples(const caf::actor& local, const caf::actor& remote) {
  sample_list s;
  // The type-ID block, in its order.
  s.type(make_prompt(0));
  s.type(std::vector<prompt_task>{make_prompt(1), make_prompt(2)});
  s.type(make_sample(4));
  s.type(make_group(5));
  s.type(std::vector<scored_group>{make_group(6), make_group(7)});
  s.type(rollout_progress{
      3, 1LL << 40, 55, 12.25, 0.125, 9, rollouter_state::resuming, {7, 1ULL << 60}});
  s.type(make_queue_stats());
  s.type(delivery{{make_group(1), make_group(2)}, make_queue_stats()});
  s.type(sync_report{14, 3.75, 1LL << 33, 4, false, true, "worker 2 unreachable"});
  s.type(make_step_report());
  s.type(rollout_counts{2, 71, 72, 73, 74});
  s.type(std::vector<rollout_counts>{{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}});
  s.type(reward_counts{81, 82, 83, 84, 85, 86, 87, 181, 182, 183, 184, 185, 186});
  s.type(trainer_counts{91, 92, 93, 94, 95, 96, 97, 98, 99});
  s.type(weight_snapshot{1LL << 36, make_blob(0.1f)}, expect_same_weights);
  s.type(make_run_result(), [](const run_result& a, const run_result& b) {
    expect_same_weights(a.final_weights, b.final_weights);
  });
  s.type(std::vector<int32_t>{-1, 0, 1 << 30, std::numeric_limits<int32_t>::min()});
  s.type(std::vector<float>{-2.5f, 1.5f, std::numeric_limits<float>::min(), 3e38f});
  s.type(std::vector<char>{'\0', 'a', '\xff'});
  s.type(make_trainer_checkpoint(), [](const trainer_checkpoint& a, const trainer_checkpoint& b) {
    expect_same_weights(a.rollout_weights, b.rollout_weights);
  });
  s.type(make_loader_state());
  s.type(make_run_state(), [](const run_state& a, const run_state& b) {
    expect_same_weights(a.trainer.rollout_weights, b.trainer.rollout_weights);
  });
  s.type(std::vector<uint64_t>{0, 1ULL << 63, 42});
  s.type(join_request{"worker-host", 4321, 3, local});
  {
    // Every field away from its default, so a field left out of an inspect() fails here.
    worker_setup ws;
    ws.rollouter.device = "cuda:1";
    ws.rollouter.dtype = rollout_dtype::bf16;
    ws.rollouter.temperature = 0.7;
    ws.rollouter.max_new_tokens = 99;
    ws.rollouter.partial_rollout = true;
    ws.rollouter.report_starts = true;
    ws.rollouter.workload.median = 77;
    ws.rollouter.sync_delay_ms = 5;
    ws.rollouter.env_fault_every = 7;
    ws.node.rollouters = 3;
    ws.node.affinity = cpu_affinity::roles;
    ws.node.chat_template = chat_format::qwen;
    ws.node.system_prompt = "be brief";
    ws.model.path = "/models/m";
    ws.model.init.arch = model_arch::llama;
    ws.model.init.rope_theta = 5e5;
    ws.seed = 9;
    s.type(join_reply{ws, 8, local, remote, caf::actor{}});
  }
  s.type(rank_join_request{"node-b", 4242, std::string(64, 's')});
  s.type(rank_setup{3, 4, "10.0.0.1", 29500, std::string(32, 't'), "trainer:\n  lr: 1.0e-05\n"});
  s.type(make_chunk());
  s.type(weight_broadcast{1LL << 35, (1LL << 33) + 7, std::string(64, 'b')});
  s.type(console_request{static_cast<int32_t>(console_cmd::set), {"trainer.lr", "1e-5"}, true});
  s.type(console_reply{true, "", "{\"key\": \"trainer.lr\", \"effective_step\": 17}"});
  s.type(live_settings{0.5, 2, 3, 1.5e-5, 10, 20});
  s.type(admission_params{12, 0.25, 4, 3, 40, true});
  s.type(std::vector<int64_t>{-1, 0, 1LL << 40});
  s.type(trainer_status{trainer_phase::interrupted, 1LL << 40});
  s.type(sync_status{sync_activity::syncing, (1LL << 41) + 5});
  s.type(env_call{(1ULL << 50) + 3, 4, "<<12*3>>", "12*3+1=?\n", "37", {"<<1+1>>", "x"}});
  s.type(env_answer{{"36\n", "\xe2\x88\x9a"}, true, true, -0.5, true, "timed out", 12.5, 3, true});

  // Messages of the interfaces that cross nodes (messages/interfaces.hpp), atoms included.
  s.message(join_atom::value, join_request{"h", 1, 2, local});
  s.message(join_atom::value, rank_join_request{"h", 2, "secret"});
  s.message(join_atom::value, local, int32_t{8}, int32_t{3});
  s.message(leave_atom::value, std::vector<int32_t>{8, 9});
  s.message(stage_atom::value, make_chunk());
  s.message(stage_atom::value, weight_broadcast{12, 4096, std::string(64, 'c')});
  s.message(link_atom::value, std::string("10.0.0.1"), int32_t{40123}, int64_t{30000});
  s.message(launch_atom::value, int64_t{9});
  s.message(load_atom::value, int64_t{9});
  s.message(load_atom::value, weight_snapshot{9, make_blob(2.0f)});
  s.message(lost_atom::value, remote, std::string("sync deadline"));
  s.message(settle_atom::value, local.address(), int32_t{4});
  s.message(credit_atom::value, int32_t{4}, int64_t{2});
  s.message(abandon_atom::value, int32_t{4}, int64_t{1});
  s.message(started_atom::value, int32_t{4}, uint64_t{21}, int64_t{3});
  s.message(put_atom::value, make_group(20));
  s.message(score_atom::value, make_group(21));
  s.message(progress_atom::value,
            rollout_progress{1, 2, 3, 4, 5, 6, rollouter_state::generating, {8}});
  s.message(pause_atom::value, int64_t{77});
  s.message(resume_atom::value, int64_t{77});
  s.message(publish_atom::value, weight_snapshot{10, make_blob(3.0f)});
  s.message(stop_atom::value);
  s.message(checkpoint_atom::value, make_trainer_checkpoint());
  s.message(members_atom::value, int32_t{5});
  // The console's messages (a client may attach from another process).
  s.message(console_atom::value,
            console_request{static_cast<int32_t>(console_cmd::status), {}, false});
  s.message(set_atom::value, live_settings{0.0, -1, 1, 1e-4, 0, 0});
  s.message(set_atom::value, admission_params{4, 0.0, 1, -1, 8});
  s.message(set_atom::value, 0.7);
  s.message(hold_atom::value, true);
  s.message(delay_atom::value, int64_t{300});
  s.message(hang_atom::value);
  s.message(kill_atom::value);
  s.message(stats_atom::value);
  return s;
}

// The names of the block's types, by type ID - begin.
template <class Int, Int... Is>
std::vector<std::string> block_type_names(std::integer_sequence<Int, Is...>) {
  return {caf::type_name_by_id<caf::id_block::asyncrl::begin + Is>::value...};
}

// The test --------------------------------------------------------------------------------------

std::vector<char> bytes_of(caf::actor_system& sys, const caf::message& msg) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  auto err = msg.save(sink);  // not sink(msg), which drops errors in 0.17.6
  EXPECT_FALSE(err) << sys.render(err);
  return buf;
}

caf::actor_system_config& registered(caf::actor_system_config& cfg) {
  cfg.load<caf::io::middleman>();
  register_message_types(cfg);
  return cfg;
}

TEST(RemoteTypes, EveryMessageTypeCrossesAProcessBoundary) {
  echo_process child;  // declared first: the actor system below goes down before the child
  caf::actor_system_config cfg;
  caf::actor_system sys{registered(cfg)};
  actor_stopper local{sys.spawn([]() -> caf::behavior { return {[](caf::ping_atom) {}}; })};

  // Start the echo and connect to it.
  const std::string started = child.start(ASYNCRL_REMOTE_ECHO);
  ASSERT_EQ(started, "");
  std::string why;
  const std::string line = child.read_line(std::chrono::seconds(20), why);
  ASSERT_FALSE(line.empty()) << why;
  ASSERT_TRUE(line.size() <= 5 && line.find_first_not_of("0123456789") == std::string::npos)
      << "not a port: '" << line << "'";
  const int port = std::stoi(line);
  ASSERT_GT(port, 0);
  ASSERT_LE(port, 65535);
  auto echo = sys.middleman().remote_actor("127.0.0.1", static_cast<uint16_t>(port));
  ASSERT_TRUE(echo) << sys.render(echo.error());
  ASSERT_NE(echo->node(), sys.node()) << "the echo must be another process";

  const sample_list samples = make_samples(local.handle, *echo);

  // One sample per type of the block: a type added without one fails here.
  constexpr int block_size = caf::id_block::asyncrl::end - caf::id_block::asyncrl::begin;
  const auto names = block_type_names(std::make_integer_sequence<int, block_size>{});
  std::set<caf::type_id_t> covered;
  size_t type_samples = 0;
  for (const auto& s : samples.list())
    if (s.block_id != 0) ++type_samples, covered.insert(s.block_id);
  EXPECT_EQ(type_samples, static_cast<size_t>(block_size))
      << "every type of CAF_BEGIN_TYPE_ID_BLOCK(asyncrl, ...) needs exactly one sample here";
  for (auto id = caf::id_block::asyncrl::begin; id < caf::id_block::asyncrl::end; ++id)
    EXPECT_EQ(covered.count(id), 1u)
        << "no sample for " << names.at(id - caf::id_block::asyncrl::begin) << " (type ID " << id
        << ")";

  caf::scoped_actor self{sys};
  size_t replies = 0;
  for (const auto& s : samples.list()) {
    SCOPED_TRACE(s.name);
    caf::message reply;
    caf::error err;
    bool replied = false;
    auto keep = [&](caf::message_view& x) -> caf::result<caf::message> {
      reply = x.move_content_to_message();
      replied = true;
      return caf::message{};
    };
    self->request(*echo, std::chrono::seconds(10), s.msg)
        .receive([&](caf::error& e) { err = std::move(e); }, caf::catch_all<decltype(keep)>{keep});
    if (!replied) {
      ADD_FAILURE() << "no reply: " << sys.render(err);
      // A timeout means the connection is probably gone: every later request would wait 10 s.
      if (err == caf::sec::request_timeout) break;
      continue;
    }
    ++replies;
    if (reply.size() != s.msg.size()) {
      ADD_FAILURE() << "sent " << s.msg.size() << " elements, got " << reply.size() << ": "
                    << caf::to_string(reply);
      continue;
    }
    EXPECT_EQ(reply.type_token(), s.msg.type_token());
    s.check(reply);
    // The text shows every field but a weight blob's contents (s.check compares those); the
    // bytes compare actor handles by node and id. Neither alone would do: a lossy encoding
    // (CAF's floats) gives the same bytes when serialized again.
    EXPECT_EQ(caf::to_string(reply), caf::to_string(s.msg));
    EXPECT_EQ(bytes_of(sys, reply), bytes_of(sys, s.msg)) << "the serialized bytes differ";
  }
  EXPECT_EQ(replies, samples.list().size());
}

}  // namespace
}  // namespace asyncrl

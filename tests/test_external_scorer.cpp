// reward.function=external: the frame codec, the scorer client (runtime/task/external_scorer)
// against the reference scorer (examples/reward/gsm8k_scorer.py) and a fault-injecting one
// (tests/fixtures/reward/faulty_scorer.py), in stdio and socket mode, and the Reward actor with
// external workers, under the test coordinator and on a real actor system. Python is
// /usr/bin/python3 (Debian's, with python3-msgpack). Every process a test starts is reaped;
// each test checks that none of its scorers is left. No sleeps: a timeout test waits for a
// scorer that hangs forever, which is bounded by its 0.3 s timeout.

#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>
#include <nlohmann/json.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/reward.hpp"
#include "messages/type_ids.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/task/external_scorer.hpp"
#include "runtime/task/reward.hpp"
#include "runtime/task/scorer_frames.hpp"
#include "tests/actor_harness.hpp"
#include "tests/role_fakes.hpp"

#ifndef ASYNCRL_SOURCE_DIR
#error "ASYNCRL_SOURCE_DIR must be defined"
#endif

using namespace asyncrl;
using test::tiny_env;

namespace {

const std::string kPython = "/usr/bin/python3";  // Debian's, with python3-msgpack
const std::string kReference = std::string(ASYNCRL_SOURCE_DIR) + "/examples/reward/gsm8k_scorer.py";
const std::string kFaulty =
    std::string(ASYNCRL_SOURCE_DIR) + "/tests/fixtures/reward/faulty_scorer.py";

external_scorer_options command(std::vector<std::string> argv, double timeout_s = 60) {
  external_scorer_options o;
  o.command = std::move(argv);
  o.timeout_s = timeout_s;
  return o;
}

scorer_request request(uint64_t uid, std::string response, std::string truth,
                       std::string prompt = "") {
  scorer_request r;
  r.uid = uid;
  r.prompt = std::move(prompt);
  r.response = std::move(response);
  r.ground_truth = std::move(truth);
  return r;
}

// True once `pid` is no child of ours any more: it was reaped (no zombie).
bool reaped(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, WNOHANG) < 0 && errno == ECHILD;
}

// Our child processes (running or zombie) whose command line contains `needle`.
std::vector<pid_t> children_running(const std::string& needle) {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (auto* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream stat("/proc/" + std::string(e->d_name) + "/stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto close = line.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) != 2) continue;
    if (ppid != ::getpid()) continue;
    std::ifstream cmd("/proc/" + std::string(e->d_name) + "/cmdline");
    std::string args((std::istreambuf_iterator<char>(cmd)), std::istreambuf_iterator<char>());
    if (args.find(needle) != std::string::npos) out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

// --- frames ----------------------------------------------------------------------------------

TEST(ExternalScorer, RequestFramesRoundTrip) {
  // Catches: a wrong length prefix (not big-endian, or counting the header), a key misspelled
  // or missing, extra values of the wrong type.
  scorer_request r = request(1ULL << 40, "resp \xc3\xa9", "42", "prompt\n");
  r.extra = {{"group_id", int64_t{7}}, {"name", std::string("x")}, {"neg", int64_t{-3}}};
  const auto frame = encode_scorer_request(r);
  ASSERT_GT(frame.size(), 4u);
  EXPECT_EQ(scorer_frame_length(reinterpret_cast<const unsigned char*>(frame.data())),
            frame.size() - 4);
  EXPECT_EQ(scorer_frame_header(0x01020304), std::string("\x01\x02\x03\x04", 4));
  auto back = decode_scorer_request(std::string_view(frame).substr(4));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->uid, r.uid);
  EXPECT_EQ(back->prompt, r.prompt);
  EXPECT_EQ(back->response, r.response);
  EXPECT_EQ(back->ground_truth, r.ground_truth);
  ASSERT_EQ(back->extra.size(), 3u);
  EXPECT_EQ(std::get<int64_t>(back->extra[0].second), 7);
  EXPECT_EQ(std::get<std::string>(back->extra[1].second), "x");
  EXPECT_EQ(std::get<int64_t>(back->extra[2].second), -3);
}

TEST(ExternalScorer, AnswerDecodingAcceptsOnlyWellFormedAnswers) {
  // Catches: accepting an answer for another uid (a stream out of sync), a missing or
  // non-numeric or non-finite score taken as 0 instead of malformed, trailing bytes ignored.
  auto body = [](const std::string& frame) { return frame.substr(4); };
  auto ok = decode_scorer_answer(body(encode_scorer_answer(9, 0.25)), 9);
  ASSERT_TRUE(std::holds_alternative<scorer_answer>(ok)) << std::get<std::string>(ok);
  EXPECT_EQ(std::get<scorer_answer>(ok).score, 0.25);
  EXPECT_EQ(std::get<scorer_answer>(ok).info, "{}");
  auto error = [&](std::string_view b, uint64_t uid) {
    auto d = decode_scorer_answer(b, uid);
    return std::holds_alternative<std::string>(d) ? std::get<std::string>(d) : std::string();
  };
  EXPECT_NE(error(body(encode_scorer_answer(9, 1.0)), 8).find("does not match"), std::string::npos);
  EXPECT_NE(error(body(encode_scorer_answer(9, std::nan(""))), 9).find("not finite"),
            std::string::npos);
  EXPECT_NE(error(body(encode_scorer_answer(9, 1.0)) + std::string(1, '\0'), 9).find("after"),
            std::string::npos);
  EXPECT_NE(error("\xc1", 9).find("not msgpack"), std::string::npos);
  EXPECT_NE(error("\x92\x01\x02", 9).find("not a msgpack map"), std::string::npos);  // [1, 2]
  EXPECT_NE(error("\x81\xa3uid\x09", 9).find("no score"), std::string::npos);        // {uid: 9}
  EXPECT_NE(error("\x82\xa3uid\x09\xa5score\xa1x", 9).find("not a number"),          // score "x"
            std::string::npos);
  EXPECT_NE(error("\x82\xa3uid\x09\xa5score\xc3", 9).find("not a number"),  // score true
            std::string::npos);
  auto neg = decode_scorer_answer("\x82\xa3uid\x09\xa5score\xfe", 9);  // score -2 (int)
  ASSERT_TRUE(std::holds_alternative<scorer_answer>(neg));
  EXPECT_EQ(std::get<scorer_answer>(neg).score, -2.0);
}

// Found by tests/fuzz/fuzz_scorer_frames: a map header declaring 2^32 - 1 entries in a 10-byte
// answer made msgpack allocate 64 GB up front (std::bad_alloc, or the OOM killer). Every
// count is now bounded by the body's size: a decode error that names the overflow.
TEST(ExternalScorer, AHugeDeclaredCountIsADecodeErrorNotAnAllocation) {
  const std::string body("\x81\xa3uid\xdf\xff\xff\xff\xff", 10);  // {uid: map(2^32-1)}
  auto r = decode_scorer_answer(body, 7);
  ASSERT_TRUE(std::holds_alternative<std::string>(r));
  EXPECT_NE(std::get<std::string>(r).find("size overflow"), std::string::npos)
      << std::get<std::string>(r);
}

// --- the reference scorer --------------------------------------------------------------------

TEST(ExternalScorer, ReferenceScorerMatchesTheBuiltInRule) {
  // The reference must give score_response's score on the same input, including its corner
  // cases. Catches any divergence of the Python rule from runtime/task/reward.cpp.
  const std::vector<std::pair<std::string, std::string>> cases{
      {"#### 72", "72"},
      {"#### 72", "73"},
      {"so the answer is \\boxed{1,234}", "1234"},
      {"#### 1,234,567", "1234567"},
      {"#### 1,23", "123"},
      {"#### 1234,567", "1234567"},
      {"no answer here", "5"},
      {"", "0"},
      {"#### $5.00", "5"},
      {"#### 50%", "50"},
      {"#### -3", "-3"},
      {"#### +3", "3"},
      {"#### -$3", "-3"},
      {"#### $-3", "-3"},
      {"#### $$3", "3"},
      {"#### --3", "-3"},
      {"#### 3.", "3"},
      {"#### 3.50.", "3.5"},
      {"#### 5%.", "5"},
      {"#### 5.%", "5"},
      {"#### .5", "0.5"},
      {"#### -.5", "-0.5"},
      {"#### 1e3", "1000"},
      {"#### 12 apples", "12"},
      {"\\boxed{\\frac{1}{2}}", "0.5"},
      {"\\boxed{4} then \\boxed{5}", "5"},
      {"\\boxed{4} and a cut \\boxed{5", "4"},
      {"\\boxed{\\boxed{7}}", "7"},
      {"#### 7\n#### 8", "8"},
      {"#### 7\nmore text", "7"},
      {"#### 3 \\boxed{4}", "3"},
      {"####3", "3"},
      {"#### 0001", "1"},
      {"#### 1.0000001", "1"},
      {"#### 1000000.5", "1000000"},
      {"#### 1000002", "1000000"},
      {"#### 2", "two"},
      {"#### \xef\xbc\x93", "3"},  // fullwidth 3: not an ASCII digit
      {"caf\xc3\xa9 #### 5\t", "5"},
      {"#### " + std::string(400, '9'), std::string(400, '9')},  // out of double range
      {"#### 100000000000000000000", "100000000000000000000"},
      {"#### 1,000.5", "1000.5"},
      {"#### 5", " 5 "},
  };
  external_scorer s(command({kPython, kReference}));
  int ones = 0;
  uint64_t uid = 0;
  for (const auto& [response, truth] : cases) {
    const auto r = s.score(request(uid++, response, truth));
    ASSERT_EQ(r.outcome, scorer_outcome::ok) << r.error;
    EXPECT_EQ(r.score, score_response(response, truth))
        << "'" << response << "' vs '" << truth << "'";
    ones += r.score == 1.0;
  }
  EXPECT_GT(ones, 10);  // the premise: both outcomes occur
  EXPECT_LT(ones, static_cast<int>(cases.size()) - 10);
  // Random responses: noise over the characters the rule cares about around a final answer in
  // one of many spellings, against truths in several spellings.
  std::mt19937 rng(20240611);
  const std::vector<std::string> noise{"####", " ", "\\boxed{", "}", "{",  "1", "23", ",",
                                       ".",    "-", "$",        "%", "\n", "x", "0"};
  const std::vector<std::string> numbers{
      "5",   "5.",    "$5",   "5%",   "-5",     "+5",    "-$5",      "05",   "0.5", ".5",
      "-.5", "1,234", "1234", "1,23", "12,000", "12000", "12,000.0", "5.0.", "$-5", "5 "};
  const std::vector<std::string> truths{"5", "-5", "0.5", "1234", "12000", "12,000", "$5", "x"};
  auto pick = [&](const std::vector<std::string>& v) { return v[rng() % v.size()]; };
  auto some_noise = [&] {
    std::string t;
    for (int i = static_cast<int>(rng() % 4); i > 0; --i)
      t += pick(noise);
    return t;
  };
  int random_ones = 0;
  for (int k = 0; k < 800; ++k) {
    std::string response = some_noise();
    switch (rng() % 3) {
      case 0:
        response += "#### " + pick(numbers) + some_noise();
        break;
      case 1:
        response += "\\boxed{" + pick(numbers) + "}" + some_noise();
        break;
      default:
        response += pick(numbers) + some_noise();
        break;
    }
    const auto truth = pick(truths);
    const auto r = s.score(request(uid++, response, truth));
    ASSERT_EQ(r.outcome, scorer_outcome::ok) << r.error;
    ASSERT_EQ(r.score, score_response(response, truth))
        << "'" << response << "' vs '" << truth << "'";
    random_ones += r.score == 1.0;
  }
  EXPECT_GT(random_ones, 40);  // the premise: the random set has right answers too
  const auto& c = s.counts();
  EXPECT_EQ(c.ok, c.calls);
  EXPECT_EQ(c.starts, 1);  // one process served every call
  EXPECT_EQ(c.restarts, 0);
  const pid_t pid = s.pid();
  s.stop();
  EXPECT_TRUE(reaped(pid));
}

TEST(ExternalScorer, EchoCarriesPromptExtraAndInfo) {
  // The fixture's ECHO scores len(prompt) + extra.index and returns both in info. Catches a
  // prompt or extra that is not sent, or sent under another key, and info that is dropped.
  external_scorer s(command({kPython, kFaulty}));
  auto r = request(5, "FAULT:ECHO", "0", "Q: 12 + 30 =");
  r.extra = {{"group_id", int64_t{4}}, {"index", int64_t{3}}, {"tag", std::string("t")}};
  const auto got = s.score(r);
  ASSERT_EQ(got.outcome, scorer_outcome::ok) << got.error;
  EXPECT_EQ(got.score, 12.0 + 3.0);
  EXPECT_NE(got.info.find("Q: 12 + 30 ="), std::string::npos) << got.info;
  EXPECT_NE(got.info.find("\"tag\""), std::string::npos) << got.info;
  const auto i = s.score(request(6, "FAULT:INTSCORE", "0"));  // an integer score is a score
  ASSERT_EQ(i.outcome, scorer_outcome::ok) << i.error;
  EXPECT_EQ(i.score, -2.0);
}

// --- faults ----------------------------------------------------------------------------------

struct fault_case {
  const char* mode;  // the fixture's FAULT:<mode>
  scorer_outcome outcome;
  const char* error;  // part of the error text
};

void PrintTo(const fault_case& c, std::ostream* os) {
  *os << c.mode;
}

class ExternalScorerFault : public ::testing::TestWithParam<fault_case> {};

TEST_P(ExternalScorerFault, ScoresZeroIsCountedAndTheNextCallIsScoredByANewProcess) {
  // A good call, the fault, a good call. Catches: a fault that scores anything but 0 or is
  // counted under another outcome; a process left running (or a zombie) after the fault; a
  // stream kept after a malformed answer or a timeout (the next call would read the stale or
  // late answer: wrong uid, or a wrong score); no restart (the next call fails too).
  const auto& p = GetParam();
  external_scorer s(command({kPython, kFaulty}));
  auto first = s.score(request(1, "#### 5", "5"));
  ASSERT_EQ(first.outcome, scorer_outcome::ok) << first.error;
  ASSERT_EQ(first.score, 1.0);
  const pid_t before = s.pid();
  ASSERT_GT(before, 0);
  if (p.outcome == scorer_outcome::timeout) s.set_timeout(0.3);
  const auto bad = s.score(request(2, std::string("FAULT:") + p.mode, "1"));
  EXPECT_EQ(bad.outcome, p.outcome) << bad.error;
  EXPECT_EQ(bad.score, 0.0);
  EXPECT_NE(bad.error.find(p.error), std::string::npos) << bad.error;
  EXPECT_NE(bad.error.find("uid 2"), std::string::npos) << bad.error;
  EXPECT_EQ(s.pid(), -1);
  EXPECT_TRUE(reaped(before)) << "the faulty process was not reaped";
  s.set_timeout(60);
  const auto next = s.score(request(3, "thus \\boxed{7}", "7"));
  ASSERT_EQ(next.outcome, scorer_outcome::ok) << next.error;
  EXPECT_EQ(next.score, 1.0);
  EXPECT_NE(s.pid(), before);
  const auto& c = s.counts();
  EXPECT_EQ(c.calls, 3);
  EXPECT_EQ(c.ok, 2);
  EXPECT_EQ(c.timeouts, p.outcome == scorer_outcome::timeout ? 1 : 0);
  EXPECT_EQ(c.crashes, p.outcome == scorer_outcome::crashed ? 1 : 0);
  EXPECT_EQ(c.malformed, p.outcome == scorer_outcome::malformed ? 1 : 0);
  EXPECT_EQ(c.starts, 2);
  EXPECT_EQ(c.restarts, 1);
  EXPECT_EQ(c.start_failures, 0);  // the first process had answered
  const pid_t after = s.pid();
  s.stop();
  EXPECT_TRUE(reaped(after));
  EXPECT_TRUE(children_running(kFaulty).empty());
}

INSTANTIATE_TEST_SUITE_P(
    ExternalScorer, ExternalScorerFault,
    ::testing::Values(fault_case{"CRASH", scorer_outcome::crashed, "exited with status 3"},
                      fault_case{"HALF", scorer_outcome::crashed, "in the middle of its answer"},
                      fault_case{"HANG", scorer_outcome::timeout, "did not answer uid 2 within"},
                      fault_case{"GARBAGE", scorer_outcome::malformed, "not msgpack"},
                      fault_case{"TRAILING", scorer_outcome::malformed, "after the msgpack"},
                      fault_case{"NOTMAP", scorer_outcome::malformed, "not a msgpack map"},
                      fault_case{"WRONGUID", scorer_outcome::malformed, "uid 3 does not match"},
                      fault_case{"NOSCORE", scorer_outcome::malformed, "no score"},
                      fault_case{"NAN", scorer_outcome::malformed, "not finite"},
                      fault_case{"STRSCORE", scorer_outcome::malformed, "not a number"},
                      fault_case{"OVERSIZE", scorer_outcome::malformed, "over the cap"},
                      fault_case{"FLOOD", scorer_outcome::malformed, "not msgpack"}),
    [](const auto& info) { return std::string(info.param.mode); });

// VmRSS or VmHWM of this process, in bytes (0 if unreadable).
uint64_t status_bytes(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string k;
  uint64_t kb = 0;
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0 &&
        std::sscanf(line.c_str() + key.size() + 1, "%lu", &kb) == 1)
      return kb << 10;
  return 0;
}

TEST(ExternalScorer, AFloodingScorerCostsAtMostAboutOneFrameOfMemory) {
  // The scorer answers with 16 MiB frames (the cap) of garbage, without end. Catches: a reader
  // that keeps reading (or buffering) past one frame: its peak would grow with the flood, far
  // past the bound, or the call would never return; a frame cap that is not enforced. Peak RSS
  // is this process's VmHWM, reset just before the call ("5" to /proc/self/clear_refs).
  {
    std::ofstream reset("/proc/self/clear_refs");
    reset << "5";
    reset.flush();
    if (!reset) GTEST_SKIP() << "cannot reset the peak RSS (/proc/self/clear_refs)";
  }
  const uint64_t before = status_bytes("VmRSS");
  ASSERT_GT(before, 0u);
  external_scorer s(command({kPython, kFaulty}, 30));
  const auto r = s.score(request(1, "FAULT:FLOOD", "1"));
  const uint64_t peak = status_bytes("VmHWM");
  EXPECT_EQ(r.outcome, scorer_outcome::malformed) << r.error;
  EXPECT_EQ(s.pid(), -1);  // killed: the flood stops at its source
  // One frame's buffer, plus what its decode may touch: two caps. Under ThreadSanitizer every
  // byte touched also maps about 4 bytes of shadow memory (measured: 81 MiB for the 16 MiB
  // frame), so the bound scales with it; an unbounded reader would still pass it within a
  // second of the flood.
#if defined(__SANITIZE_THREAD__)
  constexpr uint64_t shadow = 5;
#else
  constexpr uint64_t shadow = 1;
#endif
  EXPECT_LT(peak - before, shadow * 2 * uint64_t{kMaxScorerFrameBytes})
      << "peak RSS grew by " << ((peak - before) >> 20) << " MiB";
  RecordProperty("peak_growth_kib", std::to_string((peak - before) >> 10));
  EXPECT_TRUE(children_running(kFaulty).empty());
}

TEST(ExternalScorer, ANonexistentCommandIsUnavailableAndGivesUpWithoutSpinning) {
  // Catches: a start error that throws or is not named; retries without bound (start_failures
  // would grow with every call).
  auto o = command({"/nonexistent/asyncrl-scorer", "--x"});
  o.max_start_failures = 3;
  external_scorer s(o);
  for (uint64_t uid = 0; uid < 3; ++uid) {
    const auto r = s.score(request(uid, "#### 1", "1"));
    EXPECT_EQ(r.outcome, scorer_outcome::unavailable);
    EXPECT_EQ(r.score, 0.0);
    EXPECT_NE(r.error.find("/nonexistent/asyncrl-scorer: No such file or directory"),
              std::string::npos)
        << r.error;
  }
  EXPECT_TRUE(s.gave_up());
  EXPECT_NE(s.give_up_reason().find("3 failed starts in a row (max_start_failures 3)"),
            std::string::npos)
      << s.give_up_reason();
  for (uint64_t uid = 3; uid < 10; ++uid)
    EXPECT_EQ(s.score(request(uid, "#### 1", "1")).outcome, scorer_outcome::unavailable);
  EXPECT_EQ(s.counts().start_failures, 3);  // no start tried after giving up
  EXPECT_EQ(s.counts().unavailable, 10);
  EXPECT_EQ(s.counts().starts, 0);
}

TEST(ExternalScorer, AScorerThatDiesAtStartUpGivesUpAfterMaxStartFailures) {
  // The process starts (exec works) but exits before its first answer, every time. Catches: a
  // scorer that dies at start-up restarted forever.
  auto o = command({kPython, kFaulty, "--die-at-start"});
  o.max_start_failures = 2;
  external_scorer s(o);
  const auto a = s.score(request(0, "#### 1", "1"));
  EXPECT_EQ(a.outcome, scorer_outcome::crashed);
  EXPECT_NE(a.error.find("exited with status 1"), std::string::npos) << a.error;
  EXPECT_FALSE(s.gave_up());
  EXPECT_EQ(s.score(request(1, "#### 1", "1")).outcome, scorer_outcome::crashed);
  EXPECT_TRUE(s.gave_up());
  EXPECT_EQ(s.score(request(2, "#### 1", "1")).outcome, scorer_outcome::unavailable);
  const auto& c = s.counts();
  EXPECT_EQ(c.starts, 2);
  EXPECT_EQ(c.start_failures, 2);
  EXPECT_EQ(c.crashes, 2);
  EXPECT_EQ(c.unavailable, 1);
  EXPECT_TRUE(children_running(kFaulty).empty());
}

TEST(ExternalScorer, AnAnsweredCallResetsTheFailedStartCount) {
  // Each round: a crash on the first call of a fresh process (a failed start), an answered
  // call on the next process, a malformed answer that ends that process. Three failed starts,
  // never two in a row. Catches a count of failed starts that an answer does not reset (the
  // client would give up on a scorer that works).
  auto o = command({kPython, kFaulty});
  o.max_start_failures = 2;
  external_scorer s(o);
  uint64_t uid = 0;
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(s.score(request(uid++, "FAULT:CRASH", "1")).outcome, scorer_outcome::crashed);
    EXPECT_EQ(s.score(request(uid++, "#### 1", "1")).score, 1.0);
    EXPECT_EQ(s.score(request(uid++, "FAULT:GARBAGE", "1")).outcome, scorer_outcome::malformed);
  }
  EXPECT_FALSE(s.gave_up());
  EXPECT_EQ(s.counts().start_failures, 3);
  EXPECT_EQ(s.counts().crashes, 3);
  EXPECT_EQ(s.counts().starts, 6);
}

TEST(ExternalScorer, StopKillsAScorerThatIgnoresEof) {
  // Catches: a stop (destructor) that waits forever for a scorer that does not exit on EOF, or
  // that leaves it running.
  auto o = command({kPython, kFaulty, "--ignore-eof"});
  o.stop_grace_s = 0.2;
  external_scorer s(o);
  ASSERT_EQ(s.score(request(0, "#### 1", "1")).score, 1.0);
  const pid_t pid = s.pid();
  s.stop();
  EXPECT_TRUE(reaped(pid));
  EXPECT_TRUE(children_running(kFaulty).empty());
}

TEST(ExternalScorer, ARequestOverTheFrameCapIsNotSent) {
  external_scorer s(command({kPython, kReference}));
  const auto r = s.score(request(0, std::string(kMaxScorerFrameBytes, 'x'), "1"));
  EXPECT_EQ(r.outcome, scorer_outcome::malformed);
  EXPECT_NE(r.error.find("over the frame cap"), std::string::npos) << r.error;
  EXPECT_EQ(s.counts().starts, 0);
}

// --- socket mode -----------------------------------------------------------------------------

// The reference scorer serving `--socket PATH`, in its own process group; ready once it has
// printed its "listening on" line. The destructor kills the group and reaps the server.
class socket_server {
 public:
  explicit socket_server(const std::string& path) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::dup2(out[1], STDOUT_FILENO);
      const char* argv[] = {kPython.c_str(), kReference.c_str(), "--socket", path.c_str(), nullptr};
      ::execv(argv[0], const_cast<char* const*>(argv));
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
  }
  ~socket_server() { kill(); }
  socket_server(const socket_server&) = delete;
  socket_server& operator=(const socket_server&) = delete;

  /// The server's first line, or "" if none came within 30 s.
  std::string first_line() {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            deadline - std::chrono::steady_clock::now())
                            .count();
      pollfd p{out_, POLLIN, 0};
      if (left <= 0 || ::poll(&p, 1, static_cast<int>(left)) <= 0) return "";
      char buf[256];
      const auto n = ::read(out_, buf, sizeof buf);
      if (n <= 0) return "";
      line.append(buf, static_cast<size_t>(n));
    }
    return line;
  }

  void kill() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
};

TEST(ExternalScorer, SocketModeAgainstTheReferenceServer) {
  // Two clients at once (a server that serves one connection at a time would time the second
  // out), scores equal to the built-in rule; then the server dies: the open connection's call
  // crashes, the next one cannot connect (unavailable, a failed start), both scored 0.
  char tmpl[] = "/tmp/asyncrl-scorer-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/scorer.sock";
  {
    socket_server server(path);
    ASSERT_NE(server.first_line().find("listening on"), std::string::npos);
    external_scorer_options o;
    o.socket = path;
    o.timeout_s = 20;
    external_scorer a(o), b(o);
    const std::vector<std::pair<std::string, std::string>> cases{
        {"#### 1,234", "1234"}, {"\\boxed{9}", "8"}, {"nothing", "1"}, {"#### 7.", "7"}};
    uint64_t uid = 0;
    for (const auto& [response, truth] : cases) {
      for (auto* s : {&a, &b}) {
        const auto r = s->score(request(uid++, response, truth));
        ASSERT_EQ(r.outcome, scorer_outcome::ok) << r.error;
        EXPECT_EQ(r.score, score_response(response, truth)) << response;
      }
    }
    EXPECT_EQ(a.counts().starts, 1);
    EXPECT_EQ(a.pid(), -1);
    server.kill();
    const auto gone = a.score(request(uid++, "#### 1", "1"));
    EXPECT_EQ(gone.outcome, scorer_outcome::crashed) << gone.error;
    EXPECT_NE(gone.error.find("closed the connection"), std::string::npos) << gone.error;
    // Connects are retried (with a growing pause) until the call's deadline: a short one.
    a.set_timeout(0.4);
    const auto refused = a.score(request(uid++, "#### 1", "1"));
    EXPECT_EQ(refused.outcome, scorer_outcome::unavailable) << refused.error;
    EXPECT_NE(refused.error.find("cannot connect to socket '" + path + "'"), std::string::npos)
        << refused.error;
    EXPECT_NE(refused.error.find(" attempts over "), std::string::npos) << refused.error;
    EXPECT_EQ(a.counts().start_failures, 1);
    EXPECT_FALSE(a.gave_up());
  }
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(children_running(kReference).empty());
}

TEST(ExternalScorer, SocketModeRejoinsAServerRestartedWithinTheTimeout) {
  // The server is killed and a new one starts on the same path about 0.3 s later, while the
  // next call is already trying to connect. Bug it catches: reconnects retried with no pause,
  // which spent max_start_failures in milliseconds and failed the run 3 ms after the kill; the
  // call must wait (up to timeout_s) and be scored by the new server. No timing is asserted:
  // the 20 s timeout only bounds the test.
  char tmpl[] = "/tmp/asyncrl-scorer-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, path = dir + "/scorer.sock";
  {
    auto server = std::make_unique<socket_server>(path);
    ASSERT_NE(server->first_line().find("listening on"), std::string::npos);
    external_scorer_options o;
    o.socket = path;
    o.timeout_s = 20;
    o.max_start_failures = 1;  // a single failed connect would give up
    external_scorer a(o);
    ASSERT_EQ(a.score(request(0, "#### 1", "1")).outcome, scorer_outcome::ok);
    server.reset();  // killed; its socket file stays, refusing connections
    const auto gone = a.score(request(1, "#### 1", "1"));
    EXPECT_EQ(gone.outcome, scorer_outcome::crashed) << gone.error;
    std::unique_ptr<socket_server> second;
    std::thread restart([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      second = std::make_unique<socket_server>(path);
    });
    const auto back = a.score(request(2, "#### 5", "5"));
    restart.join();
    EXPECT_EQ(back.outcome, scorer_outcome::ok) << back.error;
    EXPECT_EQ(back.score, 1.0);
    EXPECT_EQ(a.counts().starts, 2);
    EXPECT_EQ(a.counts().start_failures, 0);
    EXPECT_FALSE(a.gave_up());
  }
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(children_running(kReference).empty());
}

// --- config ----------------------------------------------------------------------------------

std::string config_error_of(const std::vector<std::string>& overrides) {
  try {
    load_config("", overrides);
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

TEST(ExternalScorer, ConfigNeedsExactlyOneOfCommandAndSocket) {
  // Catches: an external function with nothing to call (every response would score 0), or two
  // scorers given where only one is used.
  auto none = config_error_of({"reward.function=external"});
  EXPECT_NE(none.find("key 'reward.function': external needs reward.external.command"),
            std::string::npos)
      << none;
  auto both = config_error_of(
      {"reward.function=external", "reward.external.command=a b", "reward.external.socket=/tmp/s"});
  EXPECT_NE(both.find("command line argument 'reward.external.socket=/tmp/s': key "
                      "'reward.external.socket': must be empty"),
            std::string::npos)
      << both;
  auto bad = config_error_of({"reward.external.timeout_s=0"});
  EXPECT_NE(bad.find("key 'reward.external.timeout_s'"), std::string::npos) << bad;
  bad = config_error_of({"reward.external.max_start_failures=0"});
  EXPECT_NE(bad.find("key 'reward.external.max_start_failures'"), std::string::npos) << bad;
  auto lc = load_config(
      "", {"reward.function=external", "reward.external.command=/usr/bin/python3  x.py --flag"});
  EXPECT_EQ(lc->cfg.reward.function, reward_function::external);
  EXPECT_EQ(split_command(lc->cfg.reward.external.command),
            (std::vector<std::string>{"/usr/bin/python3", "x.py", "--flag"}));
  EXPECT_EQ(lc->cfg.reward.external.timeout_s, 30.0);
  EXPECT_EQ(lc->cfg.reward.external.max_start_failures, 3);
  const auto d = lc->schema.describe();
  for (const char* key : {"reward.external.command", "reward.external.socket",
                          "reward.external.timeout_s", "reward.external.max_start_failures"})
    EXPECT_NE(d.find(key), std::string::npos) << key;
}

// --- the Reward actor ------------------------------------------------------------------------

using puts_ptr = std::shared_ptr<std::vector<scored_group>>;

queue_actor collecting_queue(test::coordinated_system& cs, puts_ptr puts) {
  test::queue_hooks h;
  h.put = [puts](scored_group g) { puts->push_back(std::move(g)); };
  return test::fake_queue(cs, std::move(h));
}

constexpr double unscored = -1.0;

scored_group group_of(const env_ptr& env, uint64_t id, const std::string& prompt,
                      const std::string& truth, const std::vector<std::string>& texts) {
  scored_group g;
  g.group_id = id;
  g.prompt_index = 100 + id;
  g.ground_truth = truth;
  for (size_t k = 0; k < texts.size(); ++k) {
    scored_sample s;
    s.uid = id * texts.size() + k;
    s.group_id = id;
    s.index = static_cast<uint32_t>(k);
    s.prompt = env->tokenizer->encode(prompt);
    s.response = env->tokenizer->encode(texts[k]);
    s.reward = unscored;
    g.samples.push_back(s);
  }
  return g;
}

std::shared_ptr<std::optional<reward_counts>> ask_stop(test::coordinated_system& cs, reward_actor r,
                                                       int64_t sent) {
  auto counts = std::make_shared<std::optional<reward_counts>>();
  cs.sys().spawn([=](caf::event_based_actor* self) {
    self->request(r, caf::infinite, stop_atom::value, sent).then([=](reward_counts& c) {
      *counts = c;
    });
  });
  return counts;
}

template <class Handle>
std::shared_ptr<std::optional<caf::error>> watch_exit(test::coordinated_system& cs, Handle h) {
  auto reason = std::make_shared<std::optional<caf::error>>();
  cs.track(cs.sys().spawn([h, reason](caf::event_based_actor* self) -> caf::behavior {
    self->monitor(h);
    self->set_down_handler([self, reason](caf::down_msg& dm) {
      *reason = dm.reason;
      self->quit();
    });
    return {[](int32_t) {}};
  }));
  return reason;
}

TEST(ExternalScorer, RewardActorScoresThroughTheScorerAndCountsItsFaults) {
  // One worker (under the test coordinator it runs in the test's thread), one group whose
  // responses include a crash and a malformed answer, each followed by a good one.
  // Catches: external faults not scored 0 / not flagged reward_failed / not counted (failures,
  // scorer_crashes, scorer_malformed), no restart after them (the next responses fail too),
  // the prompt or extra.index not reaching the scorer (ECHO's score), and a scorer process
  // left behind once the Reward stopped.
  {
    test::coordinated_system cs;
    auto env = tiny_env({"reward.function=external", "reward.num_workers=1",
                         "reward.external.command=" + kPython + " " + kFaulty});
    auto puts = std::make_shared<std::vector<scored_group>>();
    auto reward = cs.track(spawn_reward(cs.sys(), reward_args{env, collecting_queue(cs, puts)}));
    const std::string prompt = "What is 1 + 2?";
    const std::vector<std::string> texts{"#### 3",        "FAULT:CRASH", "\\boxed{3}",
                                         "FAULT:GARBAGE", "#### 4",      "FAULT:ECHO"};
    const std::vector<double> expected{1, 0, 1, 0, 0, static_cast<double>(prompt.size() + 5)};
    const std::vector<bool> failed{false, true, false, true, false, false};
    caf::anon_send(reward, score_atom::value, group_of(env, 0, prompt, "3", texts));
    ASSERT_TRUE(cs.run_until([&] { return !puts->empty(); }, 0)) << "the group never arrived";
    ASSERT_EQ(puts->size(), 1u);
    const auto& g = puts->front();
    for (size_t k = 0; k < texts.size(); ++k) {
      EXPECT_EQ(g.samples[k].reward, expected[k]) << texts[k];
      EXPECT_EQ(g.samples[k].reward_failed, failed[k]) << texts[k];
    }
    auto counts = ask_stop(cs, reward, 1);
    ASSERT_TRUE(cs.run_until([&] { return counts->has_value(); }, 0));
    cs.run_until([] { return false; }, 0);  // the worker handles its stop
    const auto& c = **counts;
    EXPECT_EQ(c.forwarded, 1);
    EXPECT_EQ(c.failures, 2);
    EXPECT_EQ(c.timeouts, 0);
    EXPECT_EQ(c.worker_restarts, 0);  // a scorer fault is not a worker crash
    EXPECT_EQ(c.scorer_crashes, 1);
    EXPECT_EQ(c.scorer_malformed, 1);
    EXPECT_EQ(c.scorer_timeouts, 0);
    EXPECT_EQ(c.scorer_restarts, 2);
    EXPECT_EQ(c.scorer_start_failures, 0);
  }
  EXPECT_TRUE(children_running(kFaulty).empty()) << "a scorer process was left behind";
}

TEST(ExternalScorer, AScorerThatCannotStartFailsTheRewardWithItsReason) {
  // A command that does not exist: each worker gives up after 2 failed starts, is replaced
  // once (supervision.max_restarts 1), and the second give-up fails the Reward with the
  // scorer's reason. Catches: endless restarts, and a reason that does not name the scorer.
  test::coordinated_system cs;
  auto env = tiny_env({"reward.function=external", "reward.num_workers=1",
                       "reward.external.command=/nonexistent/asyncrl-scorer",
                       "reward.external.max_start_failures=2", "supervision.max_restarts=1"});
  auto puts = std::make_shared<std::vector<scored_group>>();
  auto reward = cs.track(spawn_reward(cs.sys(), reward_args{env, collecting_queue(cs, puts)}));
  auto exit = watch_exit(cs, reward);
  caf::anon_send(reward, score_atom::value,
                 group_of(env, 0, "p", "1", {"#### 1", "#### 1", "#### 1", "#### 1"}));
  ASSERT_TRUE(cs.run_until([&] { return exit->has_value(); }, 0)) << "the Reward never gave up";
  const auto why = to_string(**exit);
  EXPECT_NE(why.find("2 worker restarts within 60 s (supervision.max_restarts 1)"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("command '/nonexistent/asyncrl-scorer': 2 failed starts in a row"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("No such file or directory"), std::string::npos) << why;
  EXPECT_TRUE(puts->empty());
}

TEST(ExternalScorer, AWholeRunWithAnExternalScorerTrainsExactlyAsTheBuiltInRule) {
  // The bandit of test_bandit.cpp (reward 1 iff the response starts with '#'), scored once by
  // the built-in prefix rule and once by an external scorer with the same rule, in sync mode
  // under the test coordinator. Every reward is the same, so every step must be: the same
  // reward_mean and the same parameters (checksum), bit for bit. Catches, end to end: a reward
  // that does not reach the sample it belongs to (uid, index or group mixed up), a response
  // decoded differently for the scorer, a call lost or scored twice (the run hangs or the
  // accounting breaks), a scorer process left behind after the run.
  const std::vector<std::string> bandit{
      "reward.prefix=#",         "async_training.mode=sync",   "rollout.n=8",
      "data.train_batch_size=8", "rollout.max_new_tokens=2",   "rollout.max_batch=64",
      "rollout.chunk_tokens=1",  "trainer.micro_batch_size=8", "trainer.lr=0.02",
      "trainer.total_steps=6"};
  auto with = [&](std::vector<std::string> extra) {
    auto o = bandit;
    o.insert(o.end(), extra.begin(), extra.end());
    return test::tiny_run_config(o);
  };
  auto builtin = with({"reward.function=prefix"});
  auto external = with({"reward.function=external",
                        "reward.external.command=" + kPython + " " + kFaulty + " --prefix-hex=23"});
  auto a = test::run_coordinated(builtin->cfg);
  auto b = test::run_coordinated(external->cfg);
  ASSERT_TRUE(a.finished && b.finished) << "a run hung";
  ASSERT_TRUE(a.result.ok) << a.result.error;
  ASSERT_TRUE(b.result.ok) << b.result.error;
  ASSERT_EQ(a.metrics.size(), 6u);
  ASSERT_EQ(b.metrics.size(), a.metrics.size());
  double best = 0;
  for (size_t i = 0; i < a.metrics.size(); ++i) {
    const auto x = nlohmann::json::parse(a.metrics[i]), y = nlohmann::json::parse(b.metrics[i]);
    EXPECT_EQ(x["reward_mean"].get<double>(), y["reward_mean"].get<double>()) << "step " << i + 1;
    EXPECT_EQ(x["params_checksum"].get<double>(), y["params_checksum"].get<double>())
        << "step " << i + 1;
    EXPECT_EQ(y["reward_failures"].get<int64_t>(), 0);
    best = std::max(best, x["reward_mean"].get<double>());
  }
  EXPECT_GT(best, 0.0) << "the premise: some responses were rewarded";
  const auto& r = b.result.reward;
  EXPECT_EQ(r.forwarded, a.result.reward.forwarded);
  EXPECT_EQ(r.failures + r.timeouts, 0);
  EXPECT_EQ(r.scorer_restarts + r.scorer_crashes + r.scorer_malformed, 0);
  EXPECT_TRUE(children_running(kFaulty).empty()) << "a scorer process outlived the run";
}

TEST(ExternalScorer, RewardPoolWithDetachedWorkersOnARealActorSystem) {
  // As in a run: detached workers (each on its own thread, each with its own reference
  // scorer), groups scored concurrently, then a stop. Waits are bounded (60 s), no sleeps.
  // Catches: external workers that block the scheduler or deadlock with the Reward, scores
  // that differ from the built-in rule, a scorer process that outlives the actor system.
  auto base = tiny_env({"reward.function=external", "reward.num_workers=2",
                        "reward.external.command=" + kPython + " " + kReference});
  auto detached = std::make_shared<actor_env>(*base);
  detached->detached = true;
  env_ptr env = detached;
  const std::vector<std::string> texts{"#### 12", "\\boxed{12}", "#### 13", "twelve"};
  std::vector<std::vector<double>> want;
  {
    caf::actor_system_config cfg;
    register_message_types(cfg);
    cfg.set("scheduler.max-threads", 2);
    caf::actor_system sys{cfg};
    caf::scoped_actor self{sys};
    auto queue = test::forwarding_queue(sys, caf::actor_cast<caf::actor>(self));
    auto reward = spawn_reward(sys, reward_args{env, queue});
    const int groups = 3;
    for (int id = 0; id < groups; ++id)
      self->send(reward, score_atom::value, group_of(env, id, "q", "12", texts));
    std::vector<scored_group> got;
    bool timed_out = false;
    while (!timed_out && static_cast<int>(got.size()) < groups)
      self->receive([&](put_atom, scored_group& g) { got.push_back(std::move(g)); },
                    caf::after(std::chrono::seconds(60)) >> [&] { timed_out = true; });
    ASSERT_FALSE(timed_out) << "only " << got.size() << " of " << groups << " groups arrived";
    for (const auto& g : got)
      for (size_t k = 0; k < texts.size(); ++k) {
        EXPECT_EQ(g.samples[k].reward, score_response(texts[k], "12")) << texts[k];
        EXPECT_FALSE(g.samples[k].reward_failed);
      }
    std::optional<reward_counts> counts;
    self->request(reward, std::chrono::seconds(60), stop_atom::value, int64_t{groups})
        .receive([&](reward_counts& c) { counts = c; },
                 [&](caf::error& e) { ADD_FAILURE() << to_string(e); });
    ASSERT_TRUE(counts.has_value());
    EXPECT_EQ(counts->forwarded, groups);
    EXPECT_EQ(counts->failures + counts->timeouts, 0);
    EXPECT_EQ(counts->scorer_restarts, 0);
    caf::anon_send_exit(queue, caf::exit_reason::user_shutdown);
  }  // the actor system waits for every actor: the workers stop their scorers
  EXPECT_TRUE(children_running(kReference).empty()) << "a scorer process outlived the system";
}

}  // namespace

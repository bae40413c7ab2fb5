#include "runtime/tools/external_env.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

namespace asyncrl {

namespace {

using steady = std::chrono::steady_clock;

steady::time_point deadline_after(double seconds) {
  return steady::now() +
         std::chrono::duration_cast<steady::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

const char* to_string(env_outcome o) {
  switch (o) {
    case env_outcome::ok:
      return "ok";
    case env_outcome::timeout:
      return "timeout";
    case env_outcome::crashed:
      return "crashed";
    case env_outcome::malformed:
      return "malformed";
    case env_outcome::flood:
      return "flood";
    case env_outcome::unavailable:
      return "unavailable";
  }
  return "?";
}

external_env::external_env(external_env_options opts)
    : opts_(std::move(opts)), child_(opts_.command, opts_.socket, "environment") {
  opts_.max_start_failures = std::max<int64_t>(1, opts_.max_start_failures);
  opts_.max_observation_bytes = std::max<int64_t>(0, opts_.max_observation_bytes);
}

external_env::~external_env() {
  stop();
}

std::string external_env::end_process(double grace_s) {
  answered_ = false;
  known_.clear();
  return child_.end(grace_s);
}

void external_env::stop() noexcept {
  if (child_.running()) end_process(opts_.stop_grace_s);
}

void external_env::start_failed(const std::string& error) {
  ++counts_.start_failures;
  if (++failed_starts_in_a_row_ < opts_.max_start_failures) return;
  gave_up_ = true;
  give_up_reason_ = "external environment " + describe() + ": " +
                    std::to_string(failed_starts_in_a_row_) +
                    " failed starts in a row (max_start_failures " +
                    std::to_string(opts_.max_start_failures) + "): giving up; last: " + error;
}

env_result external_env::fail(env_outcome o, std::string error) {
  switch (o) {
    case env_outcome::timeout:
      ++counts_.timeouts;
      break;
    case env_outcome::crashed:
      ++counts_.crashes;
      break;
    case env_outcome::malformed:
      ++counts_.malformed;
      break;
    case env_outcome::flood:
      ++counts_.floods;
      break;
    case env_outcome::unavailable:
      ++counts_.unavailable;
      break;
    case env_outcome::ok:
      break;
  }
  env_result r;
  r.outcome = o;
  r.error = std::move(error);
  return r;
}

env_result external_env::reset(uint64_t episode, const std::string& task,
                               const std::string& ground_truth, uint64_t seed) noexcept {
  try {
    env_request r;
    r.type = env_request_type::reset;
    r.episode = episode;
    r.task = task;
    r.ground_truth = ground_truth;
    r.seed = seed;
    return call(r);
  } catch (const std::exception& e) {  // bad_alloc copying the request
    return fail(env_outcome::crashed, std::string("external environment: ") + e.what());
  }
}

env_result external_env::step(uint64_t episode, int32_t turn, const std::string& text) noexcept {
  try {
    env_request r;
    r.type = env_request_type::step;
    r.episode = episode;
    r.turn = turn;
    r.text = text;
    return call(r);
  } catch (const std::exception& e) {
    return fail(env_outcome::crashed, std::string("external environment: ") + e.what());
  }
}

void external_env::close(uint64_t episode) noexcept {
  try {
    if (!child_.running() || !knows(episode)) return;
    known_.erase(episode);
    env_request r;
    r.type = env_request_type::close;
    r.episode = episode;
    int err = 0;
    // A close that cannot be delivered leaves the environment in an unknown state: replace it
    // at the next call rather than guess.
    if (child_.write(encode_env_request(r), deadline_after(opts_.timeout_s), &err) != frame_io::ok)
      end_process(0);
  } catch (const std::exception&) {
    end_process(0);
  }
}

env_result external_env::call(const env_request& r) noexcept {
  try {
    ++counts_.calls;
    if (gave_up_) return fail(env_outcome::unavailable, give_up_reason_);
    const auto deadline = deadline_after(opts_.timeout_s);
    const std::string frame = encode_env_request(r);
    const std::string what =
        std::string(to_string(r.type)) + " of episode " + std::to_string(r.episode) +
        (r.type == env_request_type::step ? " (turn " + std::to_string(r.turn) + ")"
                                          : std::string());
    if (frame.size() - 4 > kMaxEnvRequestBytes)
      return fail(env_outcome::malformed, "the request for " + what + " is " +
                                              std::to_string(frame.size() - 4) +
                                              " bytes, over the frame cap; not sent");
    if (!child_.running()) {
      std::string error;
      if (!child_.start(deadline, &error)) {
        start_failed(error);
        return fail(env_outcome::unavailable, gave_up_ ? give_up_reason_ : error);
      }
      if (counts_.starts++ > 0) ++counts_.restarts;
      answered_ = false;
      known_.clear();
    }
    const bool process = child_.pid() > 0;
    const std::string who =
        "external environment " + describe() +
        (process ? " (pid " + std::to_string(child_.pid()) + ")" : std::string());
    const char* replaced = process ? "killed it" : "closed the connection";
    // The stream ended before a whole answer: the process is gone (or leaving), the server
    // hung up. A process that never answered counts as a failed start.
    auto crashed = [&](const std::string& how_far) {
      const bool first = !answered_;
      std::string how = end_process(opts_.stop_grace_s);
      std::string error =
          who + " " + (process ? how : "closed the connection") + " " + how_far + " " + what;
      if (first) start_failed(error);
      return fail(env_outcome::crashed, error);
    };
    auto timed_out = [&](const char* how_far) {
      end_process(0);
      return fail(env_outcome::timeout, who + " did not " + how_far + " " + what + " within " +
                                            seconds_text(opts_.timeout_s) + "; " + replaced);
    };
    auto refused = [&](env_outcome o, const std::string& why) {
      end_process(0);
      return fail(o, who + " sent a " + (o == env_outcome::flood ? "flood" : "malformed answer") +
                         " for " + what + ": " + why + "; " + replaced);
    };
    int err = 0;
    switch (child_.write(frame, deadline, &err)) {
      case frame_io::ok:
        break;
      case frame_io::timeout:
        return timed_out("read the request for");
      case frame_io::closed:
      case frame_io::oversize:  // not a write outcome
        return crashed("before reading the request for");
      case frame_io::error:
        return crashed(std::string("(send: ") + std::strerror(err) +
                       ") before reading the request for");
    }
    const auto cap = static_cast<uint32_t>(
        std::min<int64_t>(opts_.max_observation_bytes + kEnvAnswerSlackBytes, UINT32_MAX));
    std::string body;
    const frame_read got = child_.read_frame(&body, cap, deadline);
    switch (got.io) {
      case frame_io::ok:
        break;
      case frame_io::oversize:
        return refused(env_outcome::flood, "a frame of " + std::to_string(got.length) +
                                               " bytes, over the cap of " + std::to_string(cap));
      case frame_io::timeout:
        return timed_out(got.in_body ? "finish its answer to" : "answer");
      case frame_io::closed:
        return crashed(got.in_body ? "in the middle of its answer to" : "before answering");
      case frame_io::error:
        return crashed(std::string("(recv: ") + std::strerror(got.err) + ")" +
                       (got.in_body ? " in its answer to" : " before answering"));
    }
    auto decoded = decode_env_reply(body, r.type, r.episode,
                                    static_cast<std::size_t>(opts_.max_observation_bytes));
    if (auto* e = std::get_if<env_reply_error>(&decoded))
      return refused(
          e->problem == env_reply_problem::flood ? env_outcome::flood : env_outcome::malformed,
          e->why);
    auto& a = std::get<env_reply>(decoded);
    answered_ = true;
    failed_starts_in_a_row_ = 0;
    if (r.type == env_request_type::reset) known_.insert(r.episode);
    ++counts_.ok;
    env_result out;
    out.observation = std::move(a.observation);
    out.done = a.done;
    out.has_reward = a.has_reward;
    out.reward = a.reward;
    out.info = std::move(a.info);
    return out;
  } catch (const std::exception& e) {  // bad_alloc: nothing else throws here
    end_process(0);
    return fail(env_outcome::crashed, std::string("external environment: ") + e.what());
  }
}

}  // namespace asyncrl

#include "runtime/task/external_scorer.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

namespace asyncrl {

namespace {

using steady = std::chrono::steady_clock;

std::string errno_text(int e) {
  return std::strerror(e);
}

}  // namespace

const char* to_string(scorer_outcome o) {
  switch (o) {
    case scorer_outcome::ok:
      return "ok";
    case scorer_outcome::timeout:
      return "timeout";
    case scorer_outcome::crashed:
      return "crashed";
    case scorer_outcome::malformed:
      return "malformed";
    case scorer_outcome::unavailable:
      return "unavailable";
  }
  return "?";
}

external_scorer::external_scorer(external_scorer_options opts)
    : opts_(std::move(opts)), child_(opts_.command, opts_.socket, "scorer") {
  opts_.max_start_failures = std::max<int64_t>(1, opts_.max_start_failures);
}

external_scorer::~external_scorer() {
  stop();
}

bool external_scorer::start(steady::time_point deadline, std::string* error) {
  if (!child_.start(deadline, error)) return false;
  if (counts_.starts++ > 0) ++counts_.restarts;
  answered_ = false;
  return true;
}

std::string external_scorer::end_process(double grace_s) {
  answered_ = false;
  return child_.end(grace_s);
}

void external_scorer::stop() noexcept {
  if (child_.running()) end_process(opts_.stop_grace_s);
}

void external_scorer::start_failed(const std::string& error) {
  ++counts_.start_failures;
  if (++failed_starts_in_a_row_ < opts_.max_start_failures) return;
  gave_up_ = true;
  give_up_reason_ = "external scorer " + describe() + ": " +
                    std::to_string(failed_starts_in_a_row_) +
                    " failed starts in a row (max_start_failures " +
                    std::to_string(opts_.max_start_failures) + "): giving up; last: " + error;
}

scorer_result external_scorer::fail(scorer_outcome o, std::string error) {
  switch (o) {
    case scorer_outcome::timeout:
      ++counts_.timeouts;
      break;
    case scorer_outcome::crashed:
      ++counts_.crashes;
      break;
    case scorer_outcome::malformed:
      ++counts_.malformed;
      break;
    case scorer_outcome::unavailable:
      ++counts_.unavailable;
      break;
    case scorer_outcome::ok:
      break;
  }
  scorer_result r;
  r.outcome = o;
  r.error = std::move(error);
  return r;
}

scorer_result external_scorer::score(const scorer_request& r) noexcept {
  try {
    ++counts_.calls;
    if (gave_up_) return fail(scorer_outcome::unavailable, give_up_reason_);
    const auto deadline = steady::now() + std::chrono::duration_cast<steady::duration>(
                                              std::chrono::duration<double>(opts_.timeout_s));
    const std::string frame = encode_scorer_request(r);
    if (frame.size() - 4 > kMaxScorerFrameBytes)
      return fail(scorer_outcome::malformed, "request for uid " + std::to_string(r.uid) + " is " +
                                                 std::to_string(frame.size() - 4) +
                                                 " bytes, over the frame cap; not sent");
    if (!child_.running()) {
      std::string error;
      if (!start(deadline, &error)) {
        start_failed(error);
        return fail(scorer_outcome::unavailable, gave_up_ ? give_up_reason_ : error);
      }
    }
    const std::string who =
        "external scorer " + describe() +
        (child_.pid() > 0 ? " (pid " + std::to_string(child_.pid()) + ")" : std::string());
    const std::string uid = std::to_string(r.uid);
    // The stream ended before a whole answer: the process is gone (or leaving), the server
    // hung up. A process that never answered counts as a failed start.
    auto crashed = [&](const std::string& what) {
      const bool first = !answered_;
      const bool process = child_.pid() > 0;
      std::string how = end_process(opts_.stop_grace_s);
      std::string error =
          who + " " + (process ? how : "closed the connection") + " " + what + " uid " + uid;
      if (first) start_failed(error);
      return fail(scorer_outcome::crashed, error);
    };
    auto timed_out = [&](const char* what) {
      end_process(0);
      return fail(scorer_outcome::timeout,
                  who + " did not " + what + " uid " + uid + " within " +
                      seconds_text(opts_.timeout_s) + "; " +
                      (opts_.socket.empty() ? "killed it" : "closed the connection"));
    };
    auto malformed = [&](const std::string& why) {
      end_process(0);
      return fail(scorer_outcome::malformed,
                  who + " sent a malformed answer to uid " + uid + ": " + why + "; " +
                      (opts_.socket.empty() ? "killed it" : "closed the connection"));
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
        return crashed("(send: " + errno_text(err) + ") before reading the request for");
    }
    std::string body;
    const frame_read got = child_.read_frame(&body, kMaxScorerFrameBytes, deadline);
    switch (got.io) {
      case frame_io::ok:
        break;
      case frame_io::oversize:
        return malformed("a frame of " + std::to_string(got.length) + " bytes, over the cap of " +
                         std::to_string(kMaxScorerFrameBytes));
      case frame_io::timeout:
        return timed_out(got.in_body ? "finish its answer to" : "answer");
      case frame_io::closed:
        return crashed(got.in_body ? "in the middle of its answer to" : "before answering");
      case frame_io::error:
        return crashed("(recv: " + errno_text(got.err) + ")" +
                       (got.in_body ? " in its answer to" : " before answering"));
    }
    auto decoded = decode_scorer_answer(body, r.uid);
    if (auto* why = std::get_if<std::string>(&decoded)) return malformed(*why);
    auto& a = std::get<scorer_answer>(decoded);
    answered_ = true;
    failed_starts_in_a_row_ = 0;
    ++counts_.ok;
    scorer_result out;
    out.score = a.score;
    out.info = std::move(a.info);
    return out;
  } catch (const std::exception& e) {  // bad_alloc: nothing else throws here
    end_process(0);
    return fail(scorer_outcome::crashed, std::string("external scorer: ") + e.what());
  }
}

}  // namespace asyncrl

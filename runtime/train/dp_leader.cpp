#include "runtime/train/dp_leader.hpp"

#include <algorithm>
#include <cstring>

#include "runtime/dist/dist_group.hpp"
#include "runtime/train/sample_codec.hpp"

namespace asyncrl {

std::string dp_command_key(int rank, int64_t seq) {
  return "dp/" + std::to_string(rank) + "/" + std::to_string(seq);
}

dp_leader::dp_leader(dist_group& group, std::function<std::string()> diagnose)
    : group_(group),
      diagnose_(std::move(diagnose)),
      next_(group.world(), 0),
      tokens_(group.world(), 0),
      last_tokens_(group.world(), 0) {}

void dp_leader::post(int rank, dp_command c, const std::string& payload) {
  std::string bytes(1, static_cast<char>(c));
  bytes += payload;
  auto key = dp_command_key(rank, next_[rank]++);
  group_.post(key, bytes);
  posted_.push_back(std::move(key));
}

void dp_leader::post_all(dp_command c, const std::string& payload) {
  for (int r = 1; r < group_.world(); ++r)
    post(r, c, payload);
}

int dp_leader::route(const std::vector<const scored_sample*>& micro, bool last) {
  int64_t n = 0;
  for (const auto* s : micro)
    n += static_cast<int64_t>(s->response.size());
  const int r =
      static_cast<int>(std::min_element(tokens_.begin(), tokens_.end()) - tokens_.begin());
  tokens_[r] += n;
  if (r != 0)
    post(r, last ? dp_command::micro_batch_last : dp_command::micro_batch, encode_samples(micro));
  if (last)
    for (int k = 1; k < group_.world(); ++k)
      if (k != r) post(k, dp_command::close);
  return r;
}

void dp_leader::begin_batch() {
  post_all(dp_command::begin_batch);
}

void dp_leader::step() {
  post_all(dp_command::step);
  last_tokens_ = tokens_;
  std::fill(tokens_.begin(), tokens_.end(), 0);
  // A rank reads its commands in order and joins a step's collectives only after reading that
  // step's command, so once the previous step ran, every key up to its command was read: those
  // are erased now, and this step's wait for the next one.
  for (const auto& k : erasable_)
    group_.erase(k);
  erasable_ = std::move(posted_);
  posted_.clear();
}

void dp_leader::save() {
  post_all(dp_command::save);
}

void dp_leader::load(std::string& state) {
  post_all(dp_command::load);
  group_.broadcast_bytes(state, 0);
}

void dp_leader::set_lr(double lr) {
  std::string p(sizeof lr, '\0');
  std::memcpy(p.data(), &lr, sizeof lr);
  post_all(dp_command::set_lr, p);
}

void dp_leader::discard() {
  post_all(dp_command::discard);
  std::fill(tokens_.begin(), tokens_.end(), 0);
}

std::string dp_leader::diagnosis() {
  return diagnose_ ? diagnose_() : std::string();
}

void dp_leader::stop() noexcept {
  try {
    post_all(dp_command::stop);
  } catch (...) {  // the store or a rank is gone: the caller reaps the processes anyway
  }
}

}  // namespace asyncrl

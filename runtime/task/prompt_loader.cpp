#include "runtime/task/prompt_loader.hpp"

#include <stdexcept>
#include <utility>

#include "runtime/task/epoch_order.hpp"

namespace asyncrl {

prompt_loader::prompt_loader(std::vector<std::vector<int32_t>> prompts,
                             std::vector<std::string> truths, uint64_t seed)
    : prompts_(std::move(prompts)), truths_(std::move(truths)), seed_(seed) {
  if (prompts_.size() != truths_.size())
    throw std::invalid_argument("prompt_loader: " + std::to_string(prompts_.size()) +
                                " prompts but " + std::to_string(truths_.size()) +
                                " ground truths");
  reshuffle();
}

void prompt_loader::reshuffle() {
  // From our own stream: the same order on every machine and in every mode.
  order_ = epoch_order(prompts_.size(), seed_, state_.epoch, kPromptOrder);
  state_.pos = 0;
}

prompt_task prompt_loader::next() {
  if (!retry_.empty()) {  // keeps its group id: see loader_state::retry
    auto t = std::move(retry_.front());
    retry_.pop_front();
    return t;
  }
  if (prompts_.empty()) throw std::logic_error("prompt_loader: no training prompts");
  if (state_.pos == order_.size()) {
    ++state_.epoch;
    reshuffle();
  }
  prompt_task t;
  const auto idx = order_[state_.pos++];
  t.prompt_index = idx;
  t.seq = state_.next_seq++;
  t.prompt = prompts_[idx];
  t.ground_truth = truths_[idx];
  t.group_id = state_.next_group++;
  return t;
}

void prompt_loader::regenerate(prompt_task t) {
  t.group_id = state_.next_group++;  // fresh samples for a fresh attempt
  retry_.push_back(std::move(t));
}

void prompt_loader::retry_first(std::vector<prompt_task> lost) {
  for (auto it = lost.rbegin(); it != lost.rend(); ++it)
    retry_.push_front(std::move(*it));
}

loader_state prompt_loader::save(std::vector<prompt_task> in_flight) const {
  loader_state s = state_;
  s.retry = std::move(in_flight);
  s.retry.insert(s.retry.end(), retry_.begin(), retry_.end());
  return s;
}

void prompt_loader::restore(const loader_state& s) {
  state_.epoch = s.epoch;
  reshuffle();
  state_.pos = s.pos;
  state_.next_group = s.next_group;
  state_.next_seq = s.next_seq;
  retry_.assign(s.retry.begin(), s.retry.end());
}

}  // namespace asyncrl

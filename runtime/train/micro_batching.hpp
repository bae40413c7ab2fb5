#pragma once

// Micro-batches by a token budget (trainer.micro_batch_tokens): consecutive samples go into one
// forward/backward until the next would push its packed length past the budget. The packed
// length is what pack_samples() puts in the row: prompt + response per sample, or with shared
// prompts each group's prompt once plus its responses. Any partition gives the same update up
// to rounding (gradients are raw sums, normalised at the step), so the budget only trades
// memory for fewer, larger kernels. Torch-free.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "runtime/train/samples.hpp"

namespace asyncrl {

/// Tokens pack_samples() lays out for `samples` (padding-free).
int64_t packed_tokens(const std::vector<const scored_sample*>& samples, bool shared_prompt);

/// How many leading samples of `samples` make a full micro-batch under `budget` tokens: the
/// longest prefix that fits when the one after it does not (at least 1: a sample larger than the
/// budget trains alone). 0 when everything fits, so the micro-batch can still grow.
size_t full_micro_batch(const std::vector<const scored_sample*>& samples, int64_t budget,
                        bool shared_prompt);

/// Splits `samples`, in order, into micro-batches of at most `budget` tokens each (a sample
/// larger than the budget alone); the last one holds the remainder.
std::vector<std::vector<const scored_sample*>> split_by_tokens(
    const std::vector<const scored_sample*>& samples, int64_t budget, bool shared_prompt);

}  // namespace asyncrl

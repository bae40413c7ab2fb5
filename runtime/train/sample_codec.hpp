#pragma once

// scored_sample lists as bytes, for the micro-batches rank 0 of a data-parallel group hands to
// the other ranks (dp_leader.hpp). Little-endian fixed-width fields; only what the trainer
// reads. Torch-free.

#include <string>
#include <vector>

#include "runtime/train/samples.hpp"

namespace asyncrl {

std::string encode_samples(const std::vector<const scored_sample*>& samples);
/// Throws std::runtime_error on truncated or malformed bytes.
std::vector<scored_sample> decode_samples(const std::string& bytes);

}  // namespace asyncrl

#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/task/dataset.hpp"

namespace asyncrl {

/// The built-in verifiable reasoning task: multi-digit addition and subtraction with a short,
/// column-by-column worked answer that ends in GSM8K's "#### <number>".
struct arith_options {
  int min_digits = 1;
  int max_digits = 3;
  std::string ops = "+-";
};

/// `n` examples drawn deterministically from `seed`. Questions are unique within the result.
std::vector<qa_example> generate_arith(const arith_options& opt, size_t n, uint64_t seed);

/// A disjoint train/test split: no test question appears in train.
struct arith_splits {
  std::vector<qa_example> train;
  std::vector<qa_example> test;
};
arith_splits generate_arith_splits(const arith_options& opt, size_t train_size, size_t test_size,
                                   uint64_t seed);

/// The worked answer for `a op b` (op is '+' or '-'), ending in "#### <result>".
std::string arith_worked_answer(int64_t a, char op, int64_t b);

}  // namespace asyncrl

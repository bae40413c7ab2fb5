#pragma once

#include <string>
#include <vector>

#include "runtime/task/dataset.hpp"

namespace asyncrl {

struct data_section;

/// The train and test examples of a run: JSONL or Parquet (runtime/task/parquet_data.hpp)
/// when data.train_path / data.test_path are set, else the built-in task's disjoint splits.
struct task_data {
  std::vector<qa_example> train, test;
  std::string train_source, test_source;  // a path, or "built-in arith (seed N)"
  bool builtin = false;
};

/// Throws data_error (file:line) or std::invalid_argument (bad task options). With
/// numeric_answers (the built-in reward rules) a non-numeric ground truth is refused.
task_data load_task_data(const data_section& cfg, bool numeric_answers);

/// Writes train.jsonl and test.jsonl into `dir` so that later commands can use the same data.
void write_task_data(const task_data& d, const std::string& dir);

}  // namespace asyncrl

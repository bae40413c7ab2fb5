#pragma once

// Data files in the Hugging Face hub's layout: Parquet shards named <split>-NNNNN-of-NNNNN.parquet
// under data/. data.train_path and data.test_path name a JSONL file, a Parquet file, a glob of
// Parquet files, or a dataset directory (whose split is the key's: train or test).
//
// Reading Parquet itself needs Apache Arrow's C++ library, which Debian 12 does not package:
// the build option -DASYNCRL_PARQUET=ON links the one in the pyarrow wheel
// (runtime/task/parquet_arrow.cpp). Without it, a Parquet path is refused with the command that
// converts it to JSONL (scripts/parquet_to_jsonl.py). docs/hf-models.md ("Datasets") has the
// measurements behind that choice.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/task/dataset.hpp"

namespace asyncrl {

/// Whether `path` names Parquet data: a directory, a glob (`*`, `?` in the file name), a file
/// named *.parquet, or a file that starts with Parquet's magic bytes "PAR1".
bool is_parquet_source(const std::string& path);

/// The Parquet files `path` names for `split` (train, test), sorted by name, so that shards come
/// in order: a glob's matches; a directory's data/<split>-*.parquet, else <split>-*.parquet,
/// else <split>/*.parquet; else `path` itself. Throws data_error naming what was searched.
std::vector<std::string> parquet_files(const std::string& path, const std::string& split);

/// Whether this build reads Parquet itself (cmake -DASYNCRL_PARQUET=ON).
bool parquet_built_in();

/// Called with each row of a Parquet file and its index in the file (0-based).
using parquet_row_fn = std::function<void(const nlohmann::json& row, int64_t index)>;

/// Calls `each` with the rows of one Parquet file, in order, as JSON objects holding the
/// top-level columns `columns` (strings, numbers, bools, nulls; structs as objects, lists as
/// arrays); one row group is held at a time. `keys[i]` is the config key that asked for
/// `columns[i]`, for the error naming a missing column with the file's columns. Throws
/// data_error naming the file (and the rows and column of a damaged page); without Arrow built
/// in, data_error saying how to convert.
void read_parquet_rows(const std::string& file, const std::vector<std::string>& columns,
                       const std::vector<std::string>& keys, const parquet_row_fn& each);

/// The examples of data.train_path or data.test_path: JSONL, or Parquet (is_parquet_source)
/// for `split`, every file's rows in order. Errors name the file and line, or file and row
/// (0-based within that file).
std::vector<qa_example> load_examples(const std::string& path, const std::string& split,
                                      const jsonl_fields& fields);

}  // namespace asyncrl

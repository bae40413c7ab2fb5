#include "runtime/task/parquet_data.hpp"

#include <fnmatch.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

bool has_wildcard(const std::string& s) {
  return s.find_first_of("*?[") != std::string::npos;
}

// The regular files of `dir` whose names match `pattern`, sorted (shard order).
std::vector<std::string> matching(const fs::path& dir, const std::string& pattern) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file(ec)) continue;
    if (fnmatch(pattern.c_str(), e.path().filename().c_str(), 0) == 0)
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// The top-level column a dotted key reads ("reward_model.ground_truth" reads reward_model).
std::string column_of(const std::string& key) {
  return key.substr(0, key.find('.'));
}

}  // namespace

bool is_parquet_source(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return true;
  if (has_wildcard(fs::path(path).filename().string())) return true;
  if (ends_with(path, ".parquet")) return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string(magic, 4) == "PAR1";
}

std::vector<std::string> parquet_files(const std::string& path, const std::string& split) {
  const fs::path p(path);
  std::error_code ec;
  if (has_wildcard(p.parent_path().string()) && !fs::exists(p, ec))
    throw data_error(path + ": a glob matches file names only, not directories");
  if (has_wildcard(p.filename().string())) {
    auto dir = p.has_parent_path() ? p.parent_path() : fs::path(".");
    auto files = matching(dir, p.filename().string());
    if (files.empty()) throw data_error(path + ": no file matches");
    return files;
  }
  if (fs::is_directory(p, ec)) {
    // The hub's layout first (data/train-00000-of-00002.parquet), then the files at the top, then
    // a directory per split (the hub's refs/convert/parquet branch: default/train/0000.parquet).
    const std::vector<std::pair<fs::path, std::string>> places = {
        {p / "data", split + "-*.parquet"}, {p, split + "-*.parquet"}, {p / split, "*.parquet"}};
    for (const auto& [dir, pattern] : places)
      if (auto files = matching(dir, pattern); !files.empty()) return files;
    throw data_error(path + ": no Parquet files for split '" + split + "' (looked for data/" +
                     split + "-*.parquet, " + split + "-*.parquet and " + split +
                     "/*.parquet); another split needs a glob, e.g. " + (p / "data").string() +
                     "/validation-*.parquet");
  }
  if (!fs::exists(p, ec)) throw data_error(path + ": no such file or directory");
  return {path};
}

std::vector<qa_example> load_examples(const std::string& path, const std::string& split,
                                      const jsonl_fields& fields) {
  if (!is_parquet_source(path)) return load_jsonl(path, fields);
  const auto files = parquet_files(path, split);
  if (!parquet_built_in())
    throw data_error(path +
                     ": Parquet data, and this asyncrl was built without Arrow "
                     "(cmake -DASYNCRL_PARQUET=ON links the pyarrow wheel's). Convert it once "
                     "(needs pyarrow): python3 scripts/parquet_to_jsonl.py '" +
                     path + "' --split " + split + " --prompt-key '" + fields.prompt_key +
                     "' --answer-key '" + fields.answer_key + "' --out " + split +
                     ".jsonl, then name " + split + ".jsonl in data." + split + "_path");
  std::vector<std::string> keys = {"data.prompt_key", "data.answer_key"};
  std::vector<std::string> columns = {column_of(fields.prompt_key), column_of(fields.answer_key)};
  if (columns[1] == columns[0]) {
    columns.pop_back();
    keys.pop_back();
  }
  std::vector<qa_example> examples;
  for (const auto& file : files) {
    read_parquet_rows(file, columns, keys, [&](const nlohmann::json& row, int64_t i) {
      examples.push_back(example_of(row, fields, file + ": row " + std::to_string(i)));
    });
  }
  if (examples.empty()) throw data_error(path + ": no examples");
  return examples;
}

}  // namespace asyncrl

// Hugging Face tokenizer throughput (hf_tokenizer, one thread): encode with a cold cache (the
// word cache emptied before every document: BPE merges dominate), a first pass (emptied once,
// then filled as it goes), a warm cache, and decode; on tests/fixtures/tokenizer/corpus.jsonl
// repeated to about --mb MB, one encode call per corpus line. Median of --reps runs.
//   build/bench/bench_tokenizer [--tokenizers qwen2_5,tiny] [--mb 1] [--reps 3] [--root DIR]
//                               [--out FILE]
// qwen2_5 needs the real files: scripts/fetch_tokenizers.py.

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "bench/bench_util.hpp"
#include "runtime/text/hf_tokenizer.hpp"

using namespace asyncrl;
namespace fs = std::filesystem;

namespace {

// The repository root: this file is <root>/bench/bench_tokenizer.cpp (CMake compiles it by its
// absolute path; a relative __FILE__ means the build ran from the root).
std::string default_root() {
  fs::path root = fs::path(__FILE__).parent_path().parent_path();
  return root.empty() ? "." : root.string();
}

std::vector<std::string> load_documents(const std::string& root, double mb) {
  std::ifstream in(root + "/tests/fixtures/tokenizer/corpus.jsonl");
  if (!in) throw std::runtime_error(root + "/tests/fixtures/tokenizer/corpus.jsonl: cannot open");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(nlohmann::json::parse(l)["text"].get<std::string>());
  std::vector<std::string> docs;
  size_t bytes = 0;
  const auto target = static_cast<size_t>(mb * 1e6);
  while (bytes < target)
    for (const auto& l : lines) {
      docs.push_back(l);
      bytes += l.size();
    }
  return docs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string root = bench::arg(argc, argv, "--root", default_root());
  const double mb = std::stod(bench::arg(argc, argv, "--mb", "1"));
  const int reps = std::stoi(bench::arg(argc, argv, "--reps", "3"));
  const auto names = bench::split_list(bench::arg(argc, argv, "--tokenizers", "qwen2_5,tiny"));

  std::vector<std::string> docs;
  try {
    docs = load_documents(root, mb);
  } catch (const std::exception& e) {
    std::cerr << "bench_tokenizer: " << e.what() << "\n";
    return 1;
  }
  size_t corpus_bytes = 0;
  for (const auto& d : docs)
    corpus_bytes += d.size();

  nlohmann::ordered_json results;
  for (const auto& name : names) {
    std::string dir =
        name == "tiny" ? root + "/tests/fixtures/hf_tiny" : root + "/tests/fixtures/hf/" + name;
    double t0 = bench::now_s();
    std::shared_ptr<const hf_tokenizer> tok;
    try {
      tok = hf_tokenizer::load_dir(dir);
    } catch (const std::exception& e) {
      std::cerr << "bench_tokenizer: " << e.what()
                << " (the real tokenizers come from scripts/fetch_tokenizers.py)\n";
      return 1;
    }
    double load_s = bench::now_s() - t0;

    std::vector<std::vector<int32_t>> ids(docs.size());
    size_t tokens = 0;
    auto encode_pass = [&](bool clear_each) {
      tokens = 0;
      double s = bench::now_s();
      for (size_t i = 0; i < docs.size(); ++i) {
        if (clear_each) tok->clear_cache();
        ids[i] = tok->encode(docs[i]);
        tokens += ids[i].size();
      }
      return static_cast<double>(tokens) / (bench::now_s() - s);
    };
    std::vector<double> cold, first, warm, dec;
    for (int r = 0; r < reps; ++r) {
      cold.push_back(encode_pass(true));
      tok->clear_cache();
      first.push_back(encode_pass(false));
      warm.push_back(encode_pass(false));
      double s = bench::now_s();
      size_t out_bytes = 0;
      for (const auto& v : ids)
        out_bytes += tok->decode(v, false).size();
      dec.push_back(static_cast<double>(tokens) / (bench::now_s() - s));
      if (out_bytes == 0) return 1;  // keeps the decode from being optimized away
    }
    double w = bench::median(warm);
    results[name] = {{"load_s", load_s},
                     {"vocab_size", tok->vocab_size()},
                     {"tokens", tokens},
                     {"bytes_per_token", static_cast<double>(corpus_bytes) / tokens},
                     {"encode_cold_tokens_per_s", bench::median(cold)},
                     {"encode_first_pass_tokens_per_s", bench::median(first)},
                     {"encode_warm_tokens_per_s", w},
                     {"encode_warm_mb_per_s", w * static_cast<double>(corpus_bytes) / tokens / 1e6},
                     {"decode_tokens_per_s", bench::median(dec)},
                     {"cache_entries_after_warm", tok->cache_entries()}};
  }

  nlohmann::ordered_json j{
      {"benchmark", "hf_tokenizer"}, {"machine", bench::machine()},  {"threads", 1},
      {"documents", docs.size()},    {"corpus_bytes", corpus_bytes}, {"reps", reps},
      {"tokenizers", results}};
  bench::emit(argc, argv, j);
  return 0;
}

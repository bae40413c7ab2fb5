#include "apps/asyncrl/tokenize_command.hpp"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "apps/asyncrl/reports.hpp"
#include "runtime/model/model_io.hpp"

namespace asyncrl {

namespace {

nlohmann::ordered_json tokenize_line(const tokenizer& tok, const tokenize_command& c,
                                     const std::string& line, const std::string& where) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(where + "invalid JSON: " + e.what());
  }
  if (!c.decode) {
    if (!j.is_object() || !j.contains("text") || !j["text"].is_string())
      throw std::runtime_error(where + "expected {\"text\": \"...\"}");
    return {{"ids", tok.encode(j["text"].get<std::string>())}};
  }
  if (!j.is_object() || !j.contains("ids") || !j["ids"].is_array())
    throw std::runtime_error(where + "expected {\"ids\": [...]}");
  std::vector<int32_t> ids;
  for (auto& v : j["ids"]) {
    if (!v.is_number_integer()) throw std::runtime_error(where + "ids must be integers");
    auto id = v.get<int64_t>();
    if (id < 0 || id >= tok.vocab_size())
      throw std::runtime_error(where + "id " + std::to_string(id) + " outside the vocabulary of " +
                               std::to_string(tok.vocab_size()));
    ids.push_back(static_cast<int32_t>(id));
  }
  return {{"text", tok.decode(ids, c.skip_special)}};
}

}  // namespace

int run_tokenize_command(const tokenize_command& c) {
  auto tok = load_tokenizer_dir(c.model_dir);
  if (!tok)
    throw std::runtime_error(c.model_dir + ": no tokenizer.json (Hugging Face) or " +
                             kTokenizerFile + " in this directory");
  std::ifstream file;
  if (c.input_path != "-") {
    file.open(c.input_path, std::ios::binary);
    if (!file) throw std::runtime_error(c.input_path + ": cannot open");
  }
  std::istream& in = c.input_path == "-" ? std::cin : file;
  std::string line;
  for (size_t line_no = 1; std::getline(in, line); ++line_no) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    print_line(tokenize_line(*tok, c, line, c.input_path + ":" + std::to_string(line_no) + ": "));
  }
  return 0;
}

}  // namespace asyncrl

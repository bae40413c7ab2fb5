#include "apps/asyncrl/score_command.hpp"

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "apps/asyncrl/reports.hpp"
#include "runtime/model/logprobs.hpp"
#include "runtime/model/model_io.hpp"

namespace asyncrl {

namespace {

// The token ids of one input line, checked against the model: {"token_ids": [...]} within the
// vocabulary, or {"text": "..."} through the model's tokenizer; at least one token and at most
// max_position_embeddings. `where` ("file:line: ") starts every error.
std::vector<int64_t> parse_score_line(const std::string& line, const std::string& where,
                                      const model_bundle& b, const std::string& model_dir) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(where + "invalid JSON: " + e.what());
  }
  std::vector<int64_t> ids;
  if (j.contains("token_ids")) {
    if (!j["token_ids"].is_array()) throw std::runtime_error(where + "'token_ids' must be a list");
    for (auto& v : j["token_ids"]) {
      if (!v.is_number_integer()) throw std::runtime_error(where + "token ids must be integers");
      auto id = v.get<int64_t>();
      if (id < 0 || id >= b.config.vocab_size)
        throw std::runtime_error(where + "token id " + std::to_string(id) +
                                 " outside the vocabulary of " +
                                 std::to_string(b.config.vocab_size));
      ids.push_back(id);
    }
  } else if (j.contains("text") && j["text"].is_string()) {
    const auto& tok = need_tokenizer(b, model_dir, "give token_ids instead of text");
    for (auto id : tok.encode(j["text"].get<std::string>()))
      ids.push_back(id);
  } else {
    throw std::runtime_error(where + "expected {\"token_ids\": [...]} or {\"text\": \"...\"}");
  }
  if (ids.empty()) throw std::runtime_error(where + "no tokens to score");
  const auto n = static_cast<int64_t>(ids.size());
  if (n > b.config.max_position_embeddings)
    throw std::runtime_error(where + std::to_string(n) + " tokens exceed max_position_embeddings " +
                             std::to_string(b.config.max_position_embeddings));
  return ids;
}

// log p(ids[i] | ids[< i]) for i = 1 .. n-1 from one forward pass; empty for n = 1.
std::vector<double> score_tokens(CausalLMImpl& model, const std::vector<int64_t>& ids,
                                 torch::Device device) {
  const auto n = static_cast<int64_t>(ids.size());
  if (n < 2) return {};
  auto ids_t = torch::tensor(ids, torch::kLong).unsqueeze(0).to(device);
  auto pos =
      torch::arange(n, torch::TensorOptions().dtype(torch::kLong).device(device)).unsqueeze(0);
  auto logits = model.forward(ids_t, pos).squeeze(0);  // (n, V)
  // Position i predicts token i + 1: rows 0 .. n-2 against tokens 1 .. n-1.
  auto lp = token_logprobs(logits.narrow(0, 0, n - 1), ids_t.squeeze(0).narrow(0, 1, n - 1))
                .to(torch::kCPU, torch::kDouble);
  return std::vector<double>(lp.data_ptr<double>(), lp.data_ptr<double>() + (n - 1));
}

}  // namespace

int run_score_command(const score_command& c) {
  std::ifstream in(c.input_path);
  if (!in) throw std::runtime_error(c.input_path + ": cannot open");
  auto b = open_model(c.model);
  torch::NoGradGuard ng;
  b.model->eval();
  const auto device = torch::Device(c.model.device);
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto where = c.input_path + ":" + std::to_string(lineno) + ": ";
    auto ids = parse_score_line(line, where, b, c.model.model_dir);
    // Buffered, not flushed per line: one flush at the end.
    std::cout << score_line(score_tokens(*b.model, ids, device)).dump() << "\n";
  }
  std::cout.flush();
  return 0;
}

}  // namespace asyncrl

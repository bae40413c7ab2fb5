#include "apps/asyncrl/model_commands.hpp"

#include <spdlog/spdlog.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "apps/asyncrl/reports.hpp"
#include "apps/asyncrl/run_setup.hpp"
#include "runtime/model/logprobs.hpp"
#include "runtime/model/model_io.hpp"
#include "runtime/task/dataset.hpp"
#include "runtime/task/evaluate.hpp"
#include "runtime/task/prompting.hpp"
#include "runtime/task/reward.hpp"

namespace asyncrl {

namespace {

model_bundle open_model(const common_model_options& m) {
  check_device(m.device);
  return load_model_dir(m.model_dir, torch::Device(m.device));
}

const char_tokenizer& need_tokenizer(const model_bundle& b, const std::string& dir,
                                     const std::string& what) {
  if (!b.tokenizer)
    throw std::runtime_error(dir + ": model has no " + std::string(kTokenizerFile) + "; " + what);
  return *b.tokenizer;
}

}  // namespace

int run_eval_command(const eval_command& c) {
  auto data = load_jsonl(c.data_path);
  auto b = open_model(c.model);
  const auto& tok = need_tokenizer(b, c.model.model_dir, "eval needs a tokenizer");
  eval_options eo;
  eo.samples = c.samples;
  eo.max_new_tokens = c.max_new_tokens;
  eo.batch = c.batch;
  eo.sampling = c.sampling;
  eo.seed = c.seed;
  auto r = evaluate(b.model.ptr(), tok, data, eo);
  print_line(eval_line(c.model.model_dir, c.data_path, r, c.samples, c.sampling.temperature));
  return 0;
}

int run_generate_command(const generate_command& c) {
  auto b = open_model(c.model);
  const auto& tok = need_tokenizer(b, c.model.model_dir, "generate needs a tokenizer");
  std::vector<int32_t> prompt;
  if (c.raw) {
    prompt = tok.encode(c.prompt);
  } else {
    prompt = encode_prompt(tok, c.prompt);
  }
  generator_options go;
  go.max_slots = std::max<int64_t>(1, c.samples);
  go.max_seq_len = std::min<int64_t>(static_cast<int64_t>(prompt.size()) + c.max_new_tokens,
                                     b.config.max_position_embeddings);
  go.seed = c.seed;
  go.eos_id = tok.eos_id();
  generator gen(b.model.ptr(), go);
  for (int64_t s = 0; s < c.samples; ++s) {
    gen_request r;
    r.id = static_cast<uint64_t>(s);
    r.sample_index = static_cast<uint32_t>(s);
    r.prompt = prompt;
    r.max_new_tokens = static_cast<int32_t>(go.max_seq_len - static_cast<int64_t>(prompt.size()));
    r.sampling = c.sampling;
    gen.submit(std::move(r));
  }
  auto results = gen.run_all();
  std::sort(results.begin(), results.end(),
            [](const gen_result& a, const gen_result& b) { return a.request.id < b.request.id; });
  for (auto& res : results) {
    if (res.reason == finish_reason::error) throw std::runtime_error(res.error);
    print_line(sample_line(res, tok));
  }
  return 0;
}

int run_score_command(const score_command& c) {
  std::ifstream in(c.input_path);
  if (!in) throw std::runtime_error(c.input_path + ": cannot open");
  auto b = open_model(c.model);
  torch::NoGradGuard ng;
  b.model->eval();
  const auto device = torch::Device(c.model.device);
  std::string line;
  for (int64_t lineno = 1; std::getline(in, line); ++lineno) {
    auto where = c.input_path + ":" + std::to_string(lineno) + ": ";
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(where + "invalid JSON: " + e.what());
    }
    std::vector<int64_t> ids;
    if (j.contains("token_ids")) {
      if (!j["token_ids"].is_array())
        throw std::runtime_error(where + "'token_ids' must be a list");
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
      const auto& tok = need_tokenizer(b, c.model.model_dir, "give token_ids instead of text");
      for (auto id : tok.encode(j["text"].get<std::string>()))
        ids.push_back(id);
    } else {
      throw std::runtime_error(where + "expected {\"token_ids\": [...]} or {\"text\": \"...\"}");
    }
    if (ids.empty()) throw std::runtime_error(where + "no tokens to score");
    const auto n = static_cast<int64_t>(ids.size());
    if (n > b.config.max_position_embeddings)
      throw std::runtime_error(where + std::to_string(n) +
                               " tokens exceed max_position_embeddings " +
                               std::to_string(b.config.max_position_embeddings));
    std::vector<double> logprobs;
    if (n > 1) {
      auto ids_t = torch::tensor(ids, torch::kLong).unsqueeze(0).to(device);
      auto pos =
          torch::arange(n, torch::TensorOptions().dtype(torch::kLong).device(device)).unsqueeze(0);
      auto logits = b.model->forward(ids_t, pos).squeeze(0);  // (n, V)
      // Position i predicts token i + 1: rows 0 .. n-2 against tokens 1 .. n-1.
      auto lp = token_logprobs(logits.narrow(0, 0, n - 1), ids_t.squeeze(0).narrow(0, 1, n - 1))
                    .to(torch::kCPU, torch::kDouble);
      logprobs.assign(lp.data_ptr<double>(), lp.data_ptr<double>() + (n - 1));
    }
    std::cout << score_line(logprobs).dump() << "\n";
  }
  std::cout.flush();
  return 0;
}

}  // namespace asyncrl

#pragma once

// Samples for the trainer tests: the pointers policy_trainer::accumulate takes, and responses a
// real generator samples (with their rollout log-probs and version stamps), so that rollout and
// trainer log-probs can be compared.

#include <memory>
#include <vector>

#include "runtime/generation/generator.hpp"
#include "runtime/train/samples.hpp"

namespace asyncrl::test {

inline std::vector<const scored_sample*> ptrs(const std::vector<scored_sample>& v) {
  std::vector<const scored_sample*> p;
  for (auto& s : v)
    p.push_back(&s);
  return p;
}

/// 3 prompts x 4 responses of up to 12 tokens from `model` (6 slots, so requests join late),
/// sampled at `temperature` and stamped `version`; advantages 1 for every third response, -0.5
/// for the others (eos id 2, as tests/tiny_model.hpp's config).
inline std::vector<scored_sample> generated_samples(std::shared_ptr<CausalLMImpl> model,
                                                    double temperature = 1.0, int64_t version = 0) {
  generator_options go;
  go.max_slots = 6;
  go.max_seq_len = 40;
  go.seed = 9;
  go.eos_id = 2;
  generator gen(std::move(model), go);
  gen.set_version(version);
  for (uint32_t g = 0; g < 3; ++g)
    for (uint32_t k = 0; k < 4; ++k) {
      gen_request r;
      r.id = g * 4 + k;
      r.prompt_id = g;
      r.sample_index = k;
      r.prompt = {1, static_cast<int32_t>(5 + g), 7, 9};
      r.max_new_tokens = 12;
      r.sampling.temperature = temperature;
      gen.submit(r);
    }
  std::vector<scored_sample> out;
  for (auto& res : gen.run_all()) {
    scored_sample s;
    s.uid = res.request.id;
    s.group_id = res.request.prompt_id;
    s.prompt = res.request.prompt;
    s.response = res.request.tokens;
    s.logprobs = res.request.logprobs;
    s.versions = res.request.versions;
    s.advantage = (s.uid % 3 == 0) ? 1.0 : -0.5;
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace asyncrl::test

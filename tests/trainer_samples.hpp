#pragma once

// Samples for the trainer tests: the pointers policy_trainer::accumulate takes, batches of
// random tokens drawn from a seed, and responses a real generator samples (with their rollout
// log-probs and version stamps), so that rollout and trainer log-probs can be compared.

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/common/rng.hpp"
#include "runtime/generation/generator.hpp"
#include "runtime/train/samples.hpp"

namespace asyncrl::test {

inline std::vector<const scored_sample*> ptrs(const std::vector<scored_sample>& v) {
  std::vector<const scored_sample*> p;
  for (auto& s : v)
    p.push_back(&s);
  return p;
}

/// The shape of a random batch (random_samples). Token ids are 3..22; every prompt is the bos
/// id 1 and then 2..prompt_max tokens, shared by its group's responses.
struct sample_draw {
  int groups = 1;      // prompts
  int group_size = 1;  // responses per prompt
  int prompt_max = 5;
  int response_min = 2, response_max = 7;  // response tokens
  // true: behaviour log-probs in (-3, 0] and an advantage in [-1, 1) drawn for every response;
  // false: log-probs 0 and advantages left 0, for the test to fill in (nothing is drawn).
  bool scored = true;
  int64_t version = 0;    // every token's version, or, when version_cycle > 0,
  int version_cycle = 0;  // token j's version is j % version_cycle
};

/// Group g's response k has uid g * group_size + k. Every value is drawn from `seed` in a fixed
/// order, so the same draw and seed give the same batch.
inline std::vector<scored_sample> random_samples(const sample_draw& d, uint64_t seed) {
  rng_stream rng(seed, 1, 1);
  uint64_t c = 0;
  auto draw = [&](int lo, int hi) { return lo + static_cast<int>(rng.bits(c++) % (hi - lo + 1)); };
  std::vector<scored_sample> out;
  for (int g = 0; g < d.groups; ++g) {
    std::vector<int32_t> prompt{1};
    for (int i = draw(2, d.prompt_max); i > 0; --i)
      prompt.push_back(draw(3, 22));
    for (int k = 0; k < d.group_size; ++k) {
      scored_sample s;
      s.group_id = static_cast<uint64_t>(g);
      s.index = static_cast<uint32_t>(k);
      s.uid = static_cast<uint64_t>(g * d.group_size + k);
      s.prompt = prompt;
      for (int j = 0, n = draw(d.response_min, d.response_max); j < n; ++j) {
        s.response.push_back(draw(3, 22));
        s.logprobs.push_back(d.scored ? -static_cast<float>(rng.uniform(c++) * 3) : 0.f);
        s.versions.push_back(d.version_cycle > 0 ? j % d.version_cycle : d.version);
      }
      if (d.scored) s.advantage = rng.uniform(c++) * 2 - 1;
      out.push_back(std::move(s));
    }
  }
  return out;
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

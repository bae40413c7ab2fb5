#include "runtime/train/sample_codec.hpp"

#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace asyncrl {

namespace {

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
void put_vec(std::string& out, const std::vector<T>& v) {
  put(out, static_cast<uint64_t>(v.size()));
  if (!v.empty()) out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

struct reader {
  const std::string& s;
  size_t pos = 0;
  template <class T>
  T get() {
    if (s.size() - pos < sizeof(T)) throw std::runtime_error("sample bytes: truncated");
    T v;
    std::memcpy(&v, s.data() + pos, sizeof v);
    pos += sizeof v;
    return v;
  }
  template <class T>
  std::vector<T> get_vec() {
    const auto n = get<uint64_t>();
    if (n > (s.size() - pos) / sizeof(T)) throw std::runtime_error("sample bytes: truncated");
    std::vector<T> v(n);
    if (n > 0) std::memcpy(v.data(), s.data() + pos, n * sizeof(T));
    pos += n * sizeof(T);
    return v;
  }
};

}  // namespace

std::string encode_samples(const std::vector<const scored_sample*>& samples) {
  std::string out;
  put(out, static_cast<uint64_t>(samples.size()));
  for (const auto* s : samples) {
    put(out, s->uid);
    put(out, s->group_id);
    put(out, s->index);
    put_vec(out, s->prompt);
    put_vec(out, s->response);
    put_vec(out, s->logprobs);
    put_vec(out, s->versions);
    put_vec(out, s->loss_mask);
    put(out, s->reward);
    put(out, s->advantage);
    put(out, s->interruptions);
  }
  return out;
}

std::vector<scored_sample> decode_samples(const std::string& bytes) {
  reader r{bytes};
  const auto n = r.get<uint64_t>();
  std::vector<scored_sample> out;
  for (uint64_t i = 0; i < n; ++i) {
    scored_sample s;
    s.uid = r.get<uint64_t>();
    s.group_id = r.get<uint64_t>();
    s.index = r.get<uint32_t>();
    s.prompt = r.get_vec<int32_t>();
    s.response = r.get_vec<int32_t>();
    s.logprobs = r.get_vec<float>();
    s.versions = r.get_vec<int64_t>();
    s.loss_mask = r.get_vec<uint8_t>();
    s.reward = r.get<double>();
    s.advantage = r.get<double>();
    s.interruptions = r.get<int32_t>();
    if (s.logprobs.size() != s.response.size() || s.versions.size() != s.response.size() ||
        (!s.loss_mask.empty() && s.loss_mask.size() != s.response.size()))
      throw std::runtime_error("sample bytes: per-token lists of unequal lengths");
    out.push_back(std::move(s));
  }
  if (r.pos != bytes.size()) throw std::runtime_error("sample bytes: trailing bytes");
  return out;
}

}  // namespace asyncrl

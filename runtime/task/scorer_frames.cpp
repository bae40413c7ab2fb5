#include "runtime/task/scorer_frames.hpp"

#include "runtime/common/msgpack_limits.hpp"

#include <msgpack.hpp>

#include <cmath>
#include <sstream>

namespace asyncrl {

namespace {

// Nesting deeper than this in an answer is malformed: rendering `info` recurses.
constexpr std::size_t kMaxDepth = 64;

template <class T>
void pack_str(msgpack::packer<msgpack::sbuffer>& pk, const T& s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

std::string_view key_of(const msgpack::object& o) {
  return o.type == msgpack::type::STR ? std::string_view(o.via.str.ptr, o.via.str.size)
                                      : std::string_view();
}

std::optional<msgpack::object_handle> unpack_one(std::string_view body, std::string* why) {
  try {
    std::size_t off = 0;
    auto oh = msgpack::unpack(body.data(), body.size(), off, nullptr, nullptr,
                              msgpack_limits(body.size(), kMaxDepth));
    if (off != body.size()) {
      *why = std::to_string(body.size() - off) + " byte(s) after the msgpack value";
      return std::nullopt;
    }
    return oh;
  } catch (const std::exception& e) {
    *why = std::string("not msgpack: ") + e.what();
    return std::nullopt;
  }
}

}  // namespace

std::string scorer_frame_header(uint32_t n) {
  std::string h(4, '\0');
  h[0] = static_cast<char>((n >> 24) & 0xff);
  h[1] = static_cast<char>((n >> 16) & 0xff);
  h[2] = static_cast<char>((n >> 8) & 0xff);
  h[3] = static_cast<char>(n & 0xff);
  return h;
}

uint32_t scorer_frame_length(const unsigned char* h) {
  return (uint32_t{h[0]} << 24) | (uint32_t{h[1]} << 16) | (uint32_t{h[2]} << 8) | uint32_t{h[3]};
}

std::string encode_scorer_request(const scorer_request& r) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(5);
  pack_str(pk, std::string_view("uid"));
  pk.pack_uint64(r.uid);
  pack_str(pk, std::string_view("prompt"));
  pack_str(pk, r.prompt);
  pack_str(pk, std::string_view("response"));
  pack_str(pk, r.response);
  pack_str(pk, std::string_view("ground_truth"));
  pack_str(pk, r.ground_truth);
  pack_str(pk, std::string_view("extra"));
  pk.pack_map(static_cast<uint32_t>(r.extra.size()));
  for (const auto& [k, v] : r.extra) {
    pack_str(pk, k);
    if (const auto* i = std::get_if<int64_t>(&v))
      pk.pack_int64(*i);
    else
      pack_str(pk, std::get<std::string>(v));
  }
  std::string out = scorer_frame_header(static_cast<uint32_t>(buf.size()));
  out.append(buf.data(), buf.size());
  return out;
}

std::variant<scorer_answer, std::string> decode_scorer_answer(std::string_view body,
                                                              uint64_t expected_uid) {
  std::string why;
  auto oh = unpack_one(body, &why);
  if (!oh) return why;
  const msgpack::object& o = oh->get();
  if (o.type != msgpack::type::MAP) return std::string("the answer is not a msgpack map");
  scorer_answer a;
  bool has_uid = false, has_score = false;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) return std::string("a key is not a string");
    const auto key = key_of(kv.key);
    const auto& v = kv.val;
    if (key == "uid") {
      if (v.type != msgpack::type::POSITIVE_INTEGER)
        return std::string("uid is not a non-negative integer");
      a.uid = v.via.u64;
      has_uid = true;
    } else if (key == "score") {
      switch (v.type) {
        case msgpack::type::POSITIVE_INTEGER:
          a.score = static_cast<double>(v.via.u64);
          break;
        case msgpack::type::NEGATIVE_INTEGER:
          a.score = static_cast<double>(v.via.i64);
          break;
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64:
          a.score = v.via.f64;
          break;
        default:
          return std::string("score is not a number");
      }
      if (!std::isfinite(a.score)) return std::string("score is not finite");
      has_score = true;
    } else if (key == "info") {
      std::ostringstream os;
      os << v;
      a.info = os.str();
    }
  }
  if (!has_uid) return std::string("the answer has no uid");
  if (!has_score) return std::string("the answer has no score");
  if (a.uid != expected_uid)
    return "uid " + std::to_string(a.uid) + " does not match the request's " +
           std::to_string(expected_uid);
  return a;
}

std::optional<scorer_request> decode_scorer_request(std::string_view body) {
  std::string why;
  auto oh = unpack_one(body, &why);
  if (!oh) return std::nullopt;
  const msgpack::object& o = oh->get();
  if (o.type != msgpack::type::MAP) return std::nullopt;
  scorer_request r;
  auto str = [](const msgpack::object& v, std::string& out) {
    if (v.type != msgpack::type::STR) return false;
    out.assign(v.via.str.ptr, v.via.str.size);
    return true;
  };
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    const auto key = key_of(kv.key);
    const auto& v = kv.val;
    bool ok = true;
    if (key == "uid") {
      ok = v.type == msgpack::type::POSITIVE_INTEGER;
      if (ok) r.uid = v.via.u64;
    } else if (key == "prompt") {
      ok = str(v, r.prompt);
    } else if (key == "response") {
      ok = str(v, r.response);
    } else if (key == "ground_truth") {
      ok = str(v, r.ground_truth);
    } else if (key == "extra") {
      ok = v.type == msgpack::type::MAP;
      for (uint32_t j = 0; ok && j < v.via.map.size; ++j) {
        const auto& e = v.via.map.ptr[j];
        std::string k;
        if (!str(e.key, k)) return std::nullopt;
        if (e.val.type == msgpack::type::POSITIVE_INTEGER ||
            e.val.type == msgpack::type::NEGATIVE_INTEGER) {
          r.extra.emplace_back(k, e.val.via.i64);
        } else {
          std::string s;
          if (!str(e.val, s)) return std::nullopt;
          r.extra.emplace_back(k, std::move(s));
        }
      }
    }
    if (!ok) return std::nullopt;
  }
  return r;
}

std::string encode_scorer_answer(uint64_t uid, double score) {
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  pk.pack_map(3);
  pack_str(pk, std::string_view("uid"));
  pk.pack_uint64(uid);
  pack_str(pk, std::string_view("score"));
  pk.pack_double(score);
  pack_str(pk, std::string_view("info"));
  pk.pack_map(0);
  std::string out = scorer_frame_header(static_cast<uint32_t>(buf.size()));
  out.append(buf.data(), buf.size());
  return out;
}

}  // namespace asyncrl

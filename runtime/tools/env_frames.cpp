#include "runtime/tools/env_frames.hpp"

#include "runtime/common/framed_child.hpp"
#include "runtime/common/msgpack_limits.hpp"

#include <msgpack.hpp>

#include <cmath>
#include <limits>
#include <sstream>

namespace asyncrl {

namespace {

// Nesting deeper than this in an answer is malformed: rendering `info` recurses.
constexpr std::size_t kMaxDepth = 64;

using packer = msgpack::packer<msgpack::sbuffer>;

void pack_str(packer& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

std::string_view str_of(const msgpack::object& o) {
  return std::string_view(o.via.str.ptr, o.via.str.size);
}

std::string framed(const msgpack::sbuffer& buf) {
  std::string out = frame_header(static_cast<uint32_t>(buf.size()));
  out.append(buf.data(), buf.size());
  return out;
}

// One msgpack value filling all of `body`; `*why` says what is wrong otherwise.
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

const char* to_string(env_request_type t) {
  switch (t) {
    case env_request_type::reset:
      return "reset";
    case env_request_type::step:
      return "step";
    case env_request_type::close:
      return "close";
  }
  return "?";
}

std::string encode_env_request(const env_request& r) {
  msgpack::sbuffer buf;
  packer pk(buf);
  switch (r.type) {
    case env_request_type::reset:
      pk.pack_map(5);
      break;
    case env_request_type::step:
      pk.pack_map(4);
      break;
    case env_request_type::close:
      pk.pack_map(2);
      break;
  }
  pack_str(pk, "type");
  pack_str(pk, to_string(r.type));
  pack_str(pk, "episode");
  pk.pack_uint64(r.episode);
  if (r.type == env_request_type::reset) {
    pack_str(pk, "task");
    pack_str(pk, r.task);
    pack_str(pk, "ground_truth");
    pack_str(pk, r.ground_truth);
    pack_str(pk, "seed");
    pk.pack_uint64(r.seed);
  } else if (r.type == env_request_type::step) {
    pack_str(pk, "turn");
    pk.pack_int32(r.turn);
    pack_str(pk, "text");
    pack_str(pk, r.text);
  }
  return framed(buf);
}

std::optional<env_request> decode_env_request(std::string_view body) {
  std::string why;
  auto oh = unpack_one(body, &why);
  if (!oh || oh->get().type != msgpack::type::MAP) return std::nullopt;
  const auto& m = oh->get().via.map;
  env_request r;
  bool type = false, episode = false, task = false, truth = false, seed = false, turn = false,
       text = false;
  for (uint32_t i = 0; i < m.size; ++i) {
    const auto& k = m.ptr[i].key;
    const auto& v = m.ptr[i].val;
    if (k.type != msgpack::type::STR) return std::nullopt;
    const auto key = str_of(k);
    const bool is_str = v.type == msgpack::type::STR;
    const bool is_uint = v.type == msgpack::type::POSITIVE_INTEGER;
    if (key == "type") {
      if (!is_str) return std::nullopt;
      const auto t = str_of(v);
      if (t == "reset")
        r.type = env_request_type::reset;
      else if (t == "step")
        r.type = env_request_type::step;
      else if (t == "close")
        r.type = env_request_type::close;
      else
        return std::nullopt;
      type = true;
    } else if (key == "episode") {
      if (!is_uint) return std::nullopt;
      r.episode = v.via.u64;
      episode = true;
    } else if (key == "task") {
      if (!is_str) return std::nullopt;
      r.task = std::string(str_of(v));
      task = true;
    } else if (key == "ground_truth") {
      if (!is_str) return std::nullopt;
      r.ground_truth = std::string(str_of(v));
      truth = true;
    } else if (key == "seed") {
      if (!is_uint) return std::nullopt;
      r.seed = v.via.u64;
      seed = true;
    } else if (key == "turn") {
      if (!is_uint || v.via.u64 > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
        return std::nullopt;
      r.turn = static_cast<int32_t>(v.via.u64);
      turn = true;
    } else if (key == "text") {
      if (!is_str) return std::nullopt;
      r.text = std::string(str_of(v));
      text = true;
    }
  }
  if (!type || !episode) return std::nullopt;
  if (r.type == env_request_type::reset && !(task && truth && seed)) return std::nullopt;
  if (r.type == env_request_type::step && !(turn && text)) return std::nullopt;
  return r;
}

std::variant<env_reply, env_reply_error> decode_env_reply(std::string_view body,
                                                          env_request_type type, uint64_t episode,
                                                          std::size_t max_observation_bytes) {
  auto bad = [](std::string why) {
    return env_reply_error{env_reply_problem::malformed, std::move(why)};
  };
  std::string why;
  auto oh = unpack_one(body, &why);
  if (!oh) return bad(why);
  const msgpack::object& o = oh->get();
  if (o.type != msgpack::type::MAP) return bad("the answer is not a msgpack map");
  const bool reset = type == env_request_type::reset;
  env_reply a;
  bool has_episode = false, has_ok = false, has_done = false;
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    if (kv.key.type != msgpack::type::STR) return bad("a key is not a string");
    const auto key = str_of(kv.key);
    const auto& v = kv.val;
    if (key == "episode") {
      if (v.type != msgpack::type::POSITIVE_INTEGER)
        return bad("episode is not a non-negative integer");
      a.episode = v.via.u64;
      has_episode = true;
    } else if (key == "observation") {
      if (v.type != msgpack::type::STR) return bad("observation is not a string");
      if (v.via.str.size > max_observation_bytes)
        return env_reply_error{env_reply_problem::flood, "an observation of " +
                                                             std::to_string(v.via.str.size) +
                                                             " bytes, over max_observation_bytes " +
                                                             std::to_string(max_observation_bytes)};
      a.observation = std::string(str_of(v));
      a.has_observation = true;
    } else if (key == "info") {
      std::ostringstream os;
      os << v;
      a.info = os.str();
    } else if (reset && key == "ok") {
      if (v.type != msgpack::type::BOOLEAN) return bad("ok is not a boolean");
      if (!v.via.boolean) return bad("ok is false");
      has_ok = true;
    } else if (!reset && key == "done") {
      if (v.type != msgpack::type::BOOLEAN) return bad("done is not a boolean");
      a.done = v.via.boolean;
      has_done = true;
    } else if (!reset && key == "reward") {
      switch (v.type) {
        case msgpack::type::NIL:
          continue;
        case msgpack::type::POSITIVE_INTEGER:
          a.reward = static_cast<double>(v.via.u64);
          break;
        case msgpack::type::NEGATIVE_INTEGER:
          a.reward = static_cast<double>(v.via.i64);
          break;
        case msgpack::type::FLOAT32:
        case msgpack::type::FLOAT64:
          a.reward = v.via.f64;
          break;
        default:
          return bad("reward is not a number");
      }
      if (!std::isfinite(a.reward)) return bad("reward is not finite");
      a.has_reward = true;
    }
  }
  if (!has_episode) return bad("the answer has no episode");
  if (a.episode != episode)
    return bad("episode " + std::to_string(a.episode) + " does not match the request's " +
               std::to_string(episode));
  if (reset && !has_ok) return bad("the answer to reset has no ok");
  if (!reset && !a.has_observation) return bad("the answer to step has no observation");
  if (!reset && !has_done) return bad("the answer to step has no done");
  return a;
}

std::string encode_env_reply(bool reset, const env_reply& a) {
  msgpack::sbuffer buf;
  packer pk(buf);
  const bool obs = !reset || a.has_observation;
  // episode, then ok (reset) or done (step), observation, reward
  const uint32_t n = 2 + (obs ? 1 : 0) + (!reset && a.has_reward ? 1 : 0);
  pk.pack_map(n);
  pack_str(pk, "episode");
  pk.pack_uint64(a.episode);
  if (reset) {
    pack_str(pk, "ok");
    pk.pack_true();
  }
  if (obs) {
    pack_str(pk, "observation");
    pack_str(pk, a.observation);
  }
  if (!reset) {
    pack_str(pk, "done");
    a.done ? pk.pack_true() : pk.pack_false();
    if (a.has_reward) {
      pack_str(pk, "reward");
      pk.pack_double(a.reward);
    }
  }
  return framed(buf);
}

}  // namespace asyncrl

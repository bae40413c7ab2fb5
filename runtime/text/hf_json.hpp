#pragma once

// Where a component sits in a tokenizer.json, for load errors that name the file and the
// component path: "tokenizer.json: pre_tokenizer.pretokenizers[0] (Split): behavior
// 'MergedWithNext' is not supported".

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace asyncrl {

struct hf_where {
  std::string file;  // the file as given to the loader
  std::string path;  // e.g. "pre_tokenizer.pretokenizers[0] (Split)"

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(file + ": " + path + ": " + what);
  }
  hf_where field(const std::string& key) const { return {file, path + "." + key}; }
  hf_where item(size_t i) const { return {file, path + "[" + std::to_string(i) + "]"}; }
  hf_where typed(const std::string& type) const { return {file, path + " (" + type + ")"}; }

  /// obj[key] as a bool; `fallback` when absent or null.
  bool get_bool(const nlohmann::json& obj, const char* key, bool fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) fail(std::string("'") + key + "' must be true or false");
    return it->get<bool>();
  }
  /// obj[key] as a string; `fallback` when absent or null.
  std::string get_string(const nlohmann::json& obj, const char* key,
                         const std::string& fallback) const {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return fallback;
    if (!it->is_string()) fail(std::string("'") + key + "' must be a string");
    return it->get<std::string>();
  }
  /// obj["type"], which every component has.
  std::string type_of(const nlohmann::json& obj) const {
    if (!obj.is_object()) fail("expected an object");
    auto it = obj.find("type");
    if (it == obj.end() || !it->is_string()) fail("missing string field 'type'");
    return it->get<std::string>();
  }
};

}  // namespace asyncrl

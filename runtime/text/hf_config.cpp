#include "runtime/text/hf_config.hpp"

#include <nlohmann/json.hpp>

#include <stdexcept>

namespace asyncrl {

namespace {

std::string token_field(const nlohmann::json& j, const char* key, const std::string& file) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  throw std::runtime_error(file + ": " + key + " must be a string or an object with \"content\"");
}

}  // namespace

hf_config hf_config::parse(const std::string& text, const std::string& file) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(file + ": invalid JSON: " + e.what());
  }
  if (!j.is_object()) throw std::runtime_error(file + ": expected a JSON object");
  hf_config c;
  c.bos_token = token_field(j, "bos_token", file);
  c.eos_token = token_field(j, "eos_token", file);
  c.pad_token = token_field(j, "pad_token", file);
  auto ct = j.find("chat_template");
  if (ct == j.end() || ct->is_null()) return c;
  if (ct->is_string()) {
    c.chat_template = ct->get<std::string>();
    return c;
  }
  if (ct->is_array()) {
    for (const auto& t : *ct)
      if (t.is_object() && t.value("name", "") == "default" && t.contains("template") &&
          t["template"].is_string()) {
        c.chat_template = t["template"].get<std::string>();
        return c;
      }
    throw std::runtime_error(file + ": chat_template is a list without a \"default\" entry");
  }
  throw std::runtime_error(file + ": chat_template must be a string or a list of templates");
}

}  // namespace asyncrl

#include "runtime/task/dataset.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string_view>

#include "runtime/task/reward.hpp"

namespace asyncrl {

namespace {

constexpr std::string_view kSpace = " \t\r\n\v\f";

std::string trim(std::string_view s) {
  auto b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return "";
  auto e = s.find_last_not_of(kSpace);
  return std::string(s.substr(b, e - b + 1));
}

void remove_quietly(const std::string& path) {
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

// `where` is "path:line" (JSONL) or "path: row N" (Parquet).
[[noreturn]] void fail_at(const std::string& where, const std::string& what) {
  throw data_error(where + ": " + what);
}

// The value at a dotted path ("reward_model.ground_truth"), or null when a part is missing.
const nlohmann::json* find_path(const nlohmann::json& obj, const std::string& dotted) {
  const nlohmann::json* at = &obj;
  size_t begin = 0;
  while (true) {
    auto end = dotted.find('.', begin);
    auto part = dotted.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!at->is_object()) return nullptr;
    auto it = at->find(part);
    if (it == at->end()) return nullptr;
    at = &*it;
    if (end == std::string::npos) return at;
    begin = end + 1;
  }
}

const nlohmann::json& field(const nlohmann::json& obj, const std::string& key,
                            const char* config_key, const std::string& where) {
  const auto* v = find_path(obj, key);
  if (v == nullptr) fail_at(where, "missing field '" + key + "' (" + config_key + ")");
  return *v;
}

// A prompt field: a string (one user turn) or a list of {role, content} messages.
void read_prompt(const nlohmann::json& v, const std::string& key, qa_example& ex,
                 const std::string& where) {
  if (v.is_string()) {
    ex.question = v.get<std::string>();
    return;
  }
  if (!v.is_array() || v.empty())
    fail_at(where, "field '" + key + "' must be a string or a list of chat messages");
  for (size_t i = 0; i < v.size(); ++i) {
    const auto& m = v[i];
    auto item = "field '" + key + "'[" + std::to_string(i) + "]";
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string())
      fail_at(where, item + " must be {\"role\": string, \"content\": string}");
    auto role = m["role"].get<std::string>();
    if (role != "system" && role != "user" && role != "assistant")
      fail_at(where, item + " has role '" + role + "' (system, user or assistant)");
    ex.messages.push_back({role, m["content"].get<std::string>()});
    if (role == "user") ex.question = ex.messages.back().content;
  }
  if (ex.question.empty()) fail_at(where, "field '" + key + "' has no user message");
}

}  // namespace

std::string gsm8k_final_answer(const std::string& answer) {
  auto at = answer.rfind("####");
  if (at == std::string::npos) return "";
  auto rest = std::string_view(answer).substr(at + 4);
  // Up to the end of that line, matching extract_final_answer, so a stray trailing line cannot
  // leak into the ground truth.
  return trim(rest.substr(0, rest.find('\n')));
}

std::string ground_truth_of(const std::string& answer) {
  if (answer.find("####") != std::string::npos) return gsm8k_final_answer(answer);
  if (answer.find("\\boxed{") != std::string::npos)
    if (auto boxed = extract_final_answer(answer)) return trim(*boxed);
  return trim(answer);
}

qa_example example_of(const nlohmann::json& obj, const jsonl_fields& fields,
                      const std::string& where) {
  qa_example ex;
  read_prompt(field(obj, fields.prompt_key, "data.prompt_key", where), fields.prompt_key, ex,
              where);
  const auto& a = field(obj, fields.answer_key, "data.answer_key", where);
  if (a.is_string())
    ex.answer = a.get<std::string>();
  else if (a.is_number())
    ex.answer = a.dump();
  else
    fail_at(where, "field '" + fields.answer_key + "' must be a string or a number");
  ex.ground_truth = ground_truth_of(ex.answer);
  if (ex.ground_truth.empty()) fail_at(where, "field '" + fields.answer_key + "' has no answer");
  // The built-in reward parses ground truth as a number; an unparsable one would score every
  // response 0.
  if (fields.numeric_answers && !parse_answer_number(ex.ground_truth))
    fail_at(where, "answer has no numeric final answer ('#### N', \\boxed{N} or a number; got '" +
                       ex.ground_truth + "'); a non-numeric answer needs reward.function=external");
  return ex;
}

std::vector<qa_example> load_jsonl(const std::string& path, const jsonl_fields& fields) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw data_error(path + ": cannot open");
  std::vector<qa_example> examples;
  std::string line;
  size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();  // Windows line endings
    // Editors on Windows may prepend a UTF-8 byte-order mark, which JSON parsers reject.
    if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);
    if (line.find_first_not_of(kSpace) == std::string::npos) continue;

    nlohmann::json obj;
    try {
      obj = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail_at(path + ":" + std::to_string(line_no), std::string("invalid JSON: ") + e.what());
    }
    if (!obj.is_object()) fail_at(path + ":" + std::to_string(line_no), "expected a JSON object");

    examples.push_back(example_of(obj, fields, path + ":" + std::to_string(line_no)));
  }
  if (in.bad()) throw data_error(path + ": read error");
  if (examples.empty()) throw data_error(path + ": no examples");
  return examples;
}

void save_jsonl(const std::string& path, const std::vector<qa_example>& examples) {
  // A reader racing the writer (or a crash) must never see a half-written dataset.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw data_error(tmp + ": cannot open for writing");
    for (size_t i = 0; i < examples.size(); ++i) {
      nlohmann::json obj;
      // A chat-message prompt is written as its message list, which load_jsonl reads back.
      if (examples[i].messages.empty()) {
        obj["question"] = examples[i].question;
      } else {
        obj["question"] = nlohmann::json::array();
        for (auto& m : examples[i].messages)
          obj["question"].push_back({{"role", m.role}, {"content", m.content}});
      }
      obj["answer"] = examples[i].answer;
      try {
        out << obj.dump() << '\n';
      } catch (const nlohmann::json::exception& e) {
        out.close();
        remove_quietly(tmp);
        throw data_error(path + ": example " + std::to_string(i) + ": " + e.what());
      }
    }
    out.flush();
    if (!out) {
      out.close();
      remove_quietly(tmp);
      throw data_error(tmp + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    remove_quietly(tmp);
    throw data_error(path + ": cannot rename from " + tmp + ": " + ec.message());
  }
}

}  // namespace asyncrl

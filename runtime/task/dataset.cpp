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

[[noreturn]] void fail_at(const std::string& path, size_t line, const std::string& what) {
  throw data_error(path + ":" + std::to_string(line) + ": " + what);
}

std::string string_field(const nlohmann::json& obj, const char* key, const std::string& path,
                         size_t line) {
  auto it = obj.find(key);
  if (it == obj.end() || !it->is_string())
    fail_at(path, line, std::string("missing string field '") + key + "'");
  return it->get<std::string>();
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

std::vector<qa_example> load_jsonl(const std::string& path) {
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
      fail_at(path, line_no, std::string("invalid JSON: ") + e.what());
    }
    if (!obj.is_object()) fail_at(path, line_no, "expected a JSON object");

    qa_example ex;
    ex.question = string_field(obj, "question", path, line_no);
    ex.answer = string_field(obj, "answer", path, line_no);
    ex.ground_truth = gsm8k_final_answer(ex.answer);
    if (ex.ground_truth.empty())
      fail_at(path, line_no, "answer has no '#### <number>' final answer");
    // The reward parses ground truth as a number; an unparsable one would score every response 0.
    if (!parse_answer_number(ex.ground_truth))
      fail_at(path, line_no,
              "answer has no '#### <number>' final answer (got '" + ex.ground_truth + "')");
    examples.push_back(std::move(ex));
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
      obj["question"] = examples[i].question;
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

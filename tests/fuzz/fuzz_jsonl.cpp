// A JSONL data set from outside (GSM8K's fields, and chat-message prompts by dotted path). A
// bad line is a std::runtime_error naming the file and line.

#include <cstdint>
#include <stdexcept>

#include "runtime/task/dataset.hpp"
#include "tests/fuzz/fuzz_util.hpp"

using namespace asyncrl;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto& path = fuzz::input_file(data, size, ".jsonl");
  for (const char* key : {"question", "prompt", "a.b.0"}) {
    jsonl_fields fields;
    fields.prompt_key = key;
    fields.numeric_answers = key[0] == 'q';
    try {
      auto rows = load_jsonl(path, fields);
      for (auto& r : rows)
        (void)ground_truth_of(r.answer);
    } catch (const std::runtime_error&) {
    } catch (const std::invalid_argument&) {
    }
  }
  return 0;
}

#include "apps/asyncrl/model_options.hpp"

#include <stdexcept>

#include "apps/asyncrl/run_setup.hpp"
#include "runtime/model/model_io.hpp"

namespace asyncrl {

model_bundle open_model(const common_model_options& m) {
  check_device(m.device, "--device");
  return load_model_dir(m.model_dir, torch::Device(m.device));
}

const tokenizer& need_tokenizer(const model_bundle& b, const std::string& dir, const char* what) {
  if (!b.tokenizer)
    throw std::runtime_error(dir + ": model has no " + std::string(kTokenizerFile) + "; " + what);
  return *b.tokenizer;
}

}  // namespace asyncrl

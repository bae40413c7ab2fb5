#pragma once

// What the model commands (eval, generate, score) share: --model/--device, and opening the
// model directory they name. Torch-free header.

#include <string>

namespace asyncrl {

class tokenizer;
struct model_bundle;

/// --model and --device.
struct common_model_options {
  std::string model_dir;
  std::string device = "cpu";
};

/// Checks the device and loads the model directory onto it.
model_bundle open_model(const common_model_options& m);

/// The model's tokenizer; throws naming the directory, and `what` to do, when it has none.
/// (`what` is a C string: a std::string temporary there makes g++ 13 warn -Wdangling-reference
/// on every caller that binds the returned reference.)
const tokenizer& need_tokenizer(const model_bundle& b, const std::string& dir, const char* what);

}  // namespace asyncrl

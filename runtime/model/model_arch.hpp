#pragma once

// The model architectures asyncrl builds (model.init.arch, a config.json's model_type). Each table
// lists the names in the order `asyncrl config --describe` shows them; the config parses them
// (runtime/config/modes.hpp includes this file).

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// model.init.arch, and a model directory's `model_type`.
enum class model_arch {
  qwen2,  // q/k/v biases
  llama,  // none (unless config.json says attention_bias)
};
inline constexpr enum_name<model_arch> model_arch_names[] = {{model_arch::qwen2, "qwen2"},
                                                             {model_arch::llama, "llama"}};
constexpr const auto& enum_names(model_arch) {
  return model_arch_names;
}

}  // namespace asyncrl

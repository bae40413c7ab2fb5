#pragma once

// `asyncrl export`: writes a model directory for other tools (transformers) from a model
// directory (e.g. a float32 final/ as a bf16 copy to share) or from a run's newest checkpoint.
// Torch-free header.

#include <string>

namespace asyncrl {

/// --model or --run, --out and --dtype of `asyncrl export`.
struct export_command {
  std::string model_dir;  // a model directory to re-save, or
  std::string run_dir;    // a train run whose newest usable checkpoint's policy is saved
  std::string out_dir;
  std::string dtype = "float32";  // float32 or bf16 (runtime.save_dtype's names)
};

/// Writes c.out_dir (config.json, model.safetensors in c.dtype, generation_config.json, the
/// tokenizer files) and prints one JSON line {"source", "out", "dtype", "parameters"} (+ "step"
/// from a checkpoint). Throws std::runtime_error naming the directory on any failure.
int run_export_command(const export_command& c);

}  // namespace asyncrl

#pragma once

// A run's checkpoint on disk: the controller's run_state (serialized with CAF's binary
// serializer), the trainer's tensors and the resolved config, as the three sections of one
// checkpoint file (runtime/checkpoint/checkpoint_file.hpp: atomic, checksummed, versioned).

#include <optional>
#include <string>
#include <vector>

#include "messages/checkpoint.hpp"

namespace asyncrl {

/// What a run resumes from.
struct resume_point {
  std::string path;         // the checkpoint file
  run_state run;            // run.trainer.state holds the trainer's tensors
  std::string config_yaml;  // the config the checkpointed run used
};

/// Writes `rs` (whose trainer.state holds the tensors) and the config as checkpoint
/// <dir>/step-N.ckpt, keeping the newest `keep`. Returns the path. Throws on I/O errors.
std::string write_run_checkpoint(const std::string& dir, int64_t keep, const run_state& rs,
                                 const std::string& config_yaml);

/// The newest checkpoint in `dir` that verifies and decodes; each newer one that does not is
/// reported in `skipped` ("path: reason"). nullopt when there is none.
std::optional<resume_point> load_resume_point(const std::string& dir,
                                              std::vector<std::string>* skipped);

}  // namespace asyncrl

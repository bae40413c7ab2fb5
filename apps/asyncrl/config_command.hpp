#pragma once

// `asyncrl config`: the resolved config as YAML, one key's value, or every key described.

#include <string>

namespace asyncrl {

struct loaded_config;

/// What `asyncrl config` prints: one key's value when get_key is set, else every key with its
/// type, value and help (describe), else the resolved YAML.
struct config_query {
  bool describe = false;
  std::string get_key;
};

/// Returns the exit code; an unknown get_key throws config_error.
int run_config_command(const loaded_config& lc, const config_query& q);

}  // namespace asyncrl

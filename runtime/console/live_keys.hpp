#pragma once

// Which config keys the console may change while a run goes on, and why the others may not.
// A live key is one whose new value the run can adopt at a step boundary without making the
// run inconsistent with its checkpoints, its ledger or its Theorem-1 guarantees.

#include <string>
#include <vector>

namespace asyncrl {

/// Who adopts a live key's new value.
enum class live_target { trainer, rollouters, controller };

struct live_key {
  const char* key;    // the config key
  const char* alias;  // the short name the console also accepts ("" = none)
  live_target target;
  const char* effect;  // when the new value takes effect
};

const std::vector<live_key>& live_keys();

/// The config key for `name` (a key or an alias) if it is live, else "".
std::string resolve_live_key(const std::string& name);

/// Why `key` cannot change during a run (for a key that is not live).
std::string why_not_live(const std::string& key);

}  // namespace asyncrl

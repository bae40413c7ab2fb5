#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// A bad config value, unknown key or unreadable config file. The message names the source
/// (file:line or the command-line argument) and the dotted key.
class config_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Where a value came from: "configs/demo.yaml:12" or "command line argument 'trainer.lr=x'".
struct value_origin {
  std::string where = "default";
};

/// A typed schema of dotted keys, each bound to a field of a config struct. Loading a YAML
/// file or a `key=value` override parses the text into the field, checks it, and on failure
/// throws config_error naming the origin and the key.
class config_schema {
 public:
  /// Returns an empty string when the value is fine, else what is wrong ("must be > 0").
  template <class T>
  using check_fn = std::function<std::string(const T&)>;

  void add(const std::string& key, int64_t* field, const std::string& help,
           check_fn<int64_t> check = {});
  void add(const std::string& key, double* field, const std::string& help,
           check_fn<double> check = {});
  void add(const std::string& key, bool* field, const std::string& help);
  void add(const std::string& key, std::string* field, const std::string& help,
           check_fn<std::string> check = {});
  /// A list of strings: a YAML sequence (`[cuda:0, cuda:1]`), or on the command line
  /// `key=[a,b]` or `key=a,b`; `[]` or an empty value is the empty list. Each item is checked.
  void add(const std::string& key, std::vector<std::string>* field, const std::string& help,
           check_fn<std::string> item_check = {});
  /// A string restricted to `choices`.
  void add_choice(const std::string& key, std::string* field, std::vector<std::string> choices,
                  const std::string& help);
  /// An enum, spelled as in its name table (enum_names(E)); the table's order is the order
  /// --describe and a bad value's error list the names in.
  template <class E>
  void add_enum(const std::string& key, E* field, const std::string& help) {
    std::vector<std::string> names;
    for (const auto& n : enum_names(E{}))
      names.push_back(n.name);
    add_named(
        key, std::move(names), [field] { return std::string(to_string(*field)); },
        [field](size_t i) { *field = enum_names(E{})[i].value; }, help);
  }

  /// A second name for `key` (verl's names, e.g. data.train_files for data.train_path): files
  /// and overrides may use either; dumps and --describe show `key`.
  void alias(const std::string& other_name, const std::string& key);

  /// Applies a YAML file: nested maps become dotted keys. A top-level `base: FILE` (relative to
  /// this file) is applied first, so a config can override another.
  void load_yaml_file(const std::string& path);
  /// Applies YAML text; `name` stands for the file in messages.
  void load_yaml_text(const std::string& text, const std::string& name);
  /// Applies one `dotted.key=value` command-line override.
  void apply_override(const std::string& assignment);

  /// Where each key got its current value.
  const value_origin& origin(const std::string& key) const;
  bool has(const std::string& key) const;
  /// The current value of `key` as text; throws config_error for an unknown key.
  std::string value(const std::string& key) const;
  /// Every key, sorted.
  std::vector<std::string> keys() const;
  /// Every key and its current value as YAML, for the run directory.
  std::string dump_yaml() const;
  /// Every key with its type, default-or-current value and help text.
  std::string describe() const;

 private:
  struct entry {
    std::string type_name;
    std::string help;
    std::function<void(const std::string& text, const std::string& where)> set;
    std::function<std::string()> get;
    bool quoted = false;
    std::function<std::vector<std::string>()> items;  // set for lists: dumped as a sequence
    value_origin origin;
  };
  void add_entry(const std::string& key, entry e);
  // A value restricted to `names` (add_choice, add_enum): `set` gets the index of the name.
  void add_named(const std::string& key, std::vector<std::string> names,
                 std::function<std::string()> get, std::function<void(size_t)> set,
                 const std::string& help);
  entry& lookup(const std::string& key, const std::string& where);

  std::map<std::string, entry> entries_;
  std::map<std::string, std::string> aliases_;  // other name -> key
  std::vector<std::string> loading_;  // files being loaded through `base:`, to catch cycles
};

/// Helper checks for the common cases.
namespace checks {
std::function<std::string(const int64_t&)> positive_int();
std::function<std::string(const int64_t&)> non_negative_int();
std::function<std::string(const int64_t&)> int_at_least(int64_t lo);
std::function<std::string(const double&)> positive();
std::function<std::string(const double&)> non_negative();
std::function<std::string(const double&)> in_range(double lo, double hi);
/// A torch device string: cpu, cuda or cuda:N; empty is allowed (the key then defaults to
/// another one).
std::function<std::string(const std::string&)> device_or_empty();
}  // namespace checks

}  // namespace asyncrl

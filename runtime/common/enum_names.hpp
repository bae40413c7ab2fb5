#pragma once

// Name tables for enums whose values are spelled out in configs, logs and JSON. Each such enum
// has one table, declared next to it, and an `enum_names(E)` overload returning that table;
// to_string() and parse_enum() work from it, and so does config_schema::add_enum, so the
// config parser, the config dump and the logs can never spell a value differently.

#include <optional>
#include <string_view>

namespace asyncrl {

/// One value of an enum and how it is spelled.
template <class E>
struct enum_name {
  E value;
  const char* name;
};

/// The spelling of `e` in its table (found through `enum_names(E)` by argument-dependent
/// lookup); "?" for a value missing from the table.
template <class E, class = decltype(enum_names(E{}))>
const char* to_string(E e) {
  for (const auto& n : enum_names(e))
    if (n.value == e) return n.name;
  return "?";
}

/// The value spelled `name` in E's table, or nullopt.
template <class E>
std::optional<E> parse_enum(std::string_view name) {
  for (const auto& n : enum_names(E{}))
    if (name == n.name) return n.value;
  return std::nullopt;
}

}  // namespace asyncrl

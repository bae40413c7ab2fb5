#pragma once

// A struct's field list, written once as (name, member pointer) pairs in a static fields():
// the CAF inspect(), the JSON writers and the tests all walk the same list, so a metric
// added there reaches every one of them.

#include <tuple>
#include <type_traits>
#include <utility>

namespace asyncrl {

template <class S, class T>
struct named_field {
  const char* name;
  T S::*member;
};

template <class S, class T>
constexpr named_field<S, T> named(const char* name, T S::*member) {
  return {name, member};
}

/// Calls f(name, field) for each field of x in list order; f gets a const reference when x is
/// const.
template <class S, class F>
void for_each_field(S& x, F&& f) {
  std::apply([&](auto... fl) { (f(fl.name, x.*(fl.member)), ...); },
             std::remove_const_t<S>::fields());
}

/// Calls f(field_1, ..., field_n) once: the shape a CAF 0.17 inspector wants.
template <class S, class F>
decltype(auto) apply_fields(S& x, F&& f) {
  return std::apply([&](auto... fl) -> decltype(auto) { return f(x.*(fl.member)...); },
                    std::remove_const_t<S>::fields());
}

}  // namespace asyncrl

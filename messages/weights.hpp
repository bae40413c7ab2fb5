#pragma once

// CAF serialization of a weight snapshot (runtime/model/weight_blob.hpp): within a process the
// snapshot's buffer is shared by pointer; across processes it travels as msgpack bytes.

#include <caf/detail/stringification_inspector.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>
#include <caf/sec.hpp>

#include <type_traits>
#include <vector>

#include "runtime/model/weight_blob.hpp"
#include "runtime/model/weight_sync.hpp"  // host_snapshot (torch-free header)

namespace asyncrl {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, weight_snapshot& x) {
  if constexpr (std::is_same<Inspector, caf::detail::stringification_inspector>::value) {
    // Printing must not serialize megabytes.
    int64_t bytes = x.blob ? x.blob->bytes() : 0;
    return f(caf::meta::type_name("weight_snapshot"), x.version, bytes);
  } else if constexpr (Inspector::reads_state) {
    std::vector<char> bytes;
    if (x.blob) bytes = pack_weights(host_snapshot(x));  // a device snapshot crosses as bytes
    return f(caf::meta::type_name("weight_snapshot"), x.version, bytes);
  } else {
    std::vector<char> bytes;
    return f(caf::meta::type_name("weight_snapshot"), x.version, bytes,
             caf::meta::load_callback([&]() -> caf::error {
               if (bytes.empty()) {
                 x.blob.reset();
                 return caf::none;
               }
               try {
                 x = unpack_weights(bytes.data(), bytes.size());
               } catch (const std::exception&) {
                 return caf::sec::invalid_argument;
               }
               return caf::none;
             }));
  }
}

}  // namespace asyncrl

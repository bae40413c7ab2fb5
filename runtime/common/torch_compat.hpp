#pragma once

// The few places where libtorch 1.13 (Debian 12's libtorch-dev) and libtorch 2.x (the PyPI
// wheel a GPU user has) differ, so that one source builds against both. Include it only from
// .cpp files that already do tensor work: it pulls in torch headers.

#include <torch/optim/optimizer.h>

#include <sstream>
#include <string>
#include <type_traits>

namespace asyncrl::compat {

/// The key under which a torch::optim optimizer keeps the state of parameter `p`. libtorch 1.13
/// keys its state map by the TensorImpl's address printed as a string; 2.x by the address
/// itself. The key follows the map's own key type, so neither version needs an #if.
template <class StateMap>
typename StateMap::key_type optimizer_state_key(const at::Tensor& p) {
  using key = typename StateMap::key_type;
  if constexpr (std::is_same_v<key, std::string>) {
    std::ostringstream os;  // what 1.13's c10::guts::to_string(TensorImpl*) wrote
    os << p.unsafeGetTensorImpl();
    return os.str();
  } else {
    return static_cast<key>(p.unsafeGetTensorImpl());
  }
}

}  // namespace asyncrl::compat

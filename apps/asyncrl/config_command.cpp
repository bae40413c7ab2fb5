#include "apps/asyncrl/config_command.hpp"

#include <iostream>

#include "runtime/config/run_config.hpp"

namespace asyncrl {

int run_config_command(const loaded_config& lc, const config_query& q) {
  if (!q.get_key.empty())
    std::cout << lc.schema.value(q.get_key) << "\n";
  else
    std::cout << (q.describe ? lc.schema.describe() : lc.schema.dump_yaml());
  return 0;
}

}  // namespace asyncrl

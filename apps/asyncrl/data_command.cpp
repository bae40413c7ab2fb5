#include "apps/asyncrl/data_command.hpp"

#include "apps/asyncrl/reports.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/task/task_data.hpp"

namespace asyncrl {

int run_data_command(const loaded_config& lc, const std::string& out_dir) {
  auto d = load_task_data(lc.cfg.data, lc.cfg.reward.function != reward_function::external);
  write_task_data(d, out_dir);
  print_line(data_line(d, out_dir));
  return 0;
}

}  // namespace asyncrl

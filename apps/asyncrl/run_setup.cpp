#include "apps/asyncrl/run_setup.hpp"

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/task/task_data.hpp"

namespace asyncrl {

run_start start_run(const loaded_config& lc) {
  const auto& cfg = lc.cfg;
  apply_runtime(cfg.runtime);
  run_start r;
  r.dir = prepare_run_dir(lc);
  r.device = c10::Device(cfg.runtime.device);
  r.data = load_task_data(cfg.data);
  write_task_data(r.data, (std::filesystem::path(r.dir) / "data").string());
  return r;
}

std::string model_source(const run_config& cfg) {
  return cfg.model.path.empty() ? "fresh init" : cfg.model.path;
}

void apply_runtime(const runtime_section& rt) {
  init_logging(rt.log_level);
  // libtorch here starts with one intra-op thread; 0 means "use every core".
  int n = rt.threads > 0 ? static_cast<int>(rt.threads)
                         : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  at::set_num_threads(n);
  check_device(rt.device);
}

std::string prepare_run_dir(const loaded_config& lc) {
  const auto& dir = lc.cfg.runtime.run_dir;
  std::filesystem::create_directories(dir);
  std::ofstream out(std::filesystem::path(dir) / "config.yaml");
  if (!out) throw std::runtime_error(dir + ": cannot write config.yaml");
  out << lc.schema.dump_yaml();
  return dir;
}

void check_device(const std::string& device) {
  c10::Device d(device);  // throws on a malformed string
  if (d.is_cuda() && !torch::cuda::is_available())
    throw std::runtime_error("runtime.device is '" + device +
                             "' but this libtorch has no usable CUDA device; use "
                             "runtime.device=cpu");
  if (d.is_cuda() && d.has_index() && d.index() >= static_cast<int>(torch::cuda::device_count()))
    throw std::runtime_error("runtime.device is '" + device + "' but only " +
                             std::to_string(torch::cuda::device_count()) + " CUDA devices exist");
}

}  // namespace asyncrl

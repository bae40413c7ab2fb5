#include "apps/asyncrl/run_setup.hpp"

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <torch/cuda.h>

#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>
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
  // The roles' own devices, before any work (an explicit key only: empty is runtime.device).
  if (!cfg.trainer.device.empty()) check_device(cfg.trainer.device, "trainer.device");
  if (!cfg.rollout.device.empty()) check_device(cfg.rollout.device, "rollout.device");
  r.data = load_task_data(cfg.data, cfg.reward.function != reward_function::external);
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
  // A run directory that cannot be written fails here, before any work, not at the first
  // checkpoint an hour later.
  const auto& dir = lc.cfg.runtime.run_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw std::runtime_error("runtime.run_dir '" + dir + "' cannot be created: " + ec.message());
  const auto path = (std::filesystem::path(dir) / "config.yaml").string();
  std::ofstream out(path);
  out << lc.schema.dump_yaml();
  out.close();
  if (!out)
    throw std::runtime_error("runtime.run_dir '" + dir + "' is not writable: cannot write " + path +
                             ": " + std::strerror(errno));
  return dir;
}

void check_free_space(const std::string& dir, uint64_t need_bytes) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0)
    throw std::runtime_error("runtime.run_dir '" + dir +
                             "': statvfs failed: " + std::strerror(errno));
  const uint64_t free_bytes = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
  if (free_bytes < need_bytes)
    throw std::runtime_error("runtime.run_dir '" + dir + "' has " +
                             std::to_string(free_bytes >> 20) + " MiB free; this run needs about " +
                             std::to_string(need_bytes >> 20) +
                             " MiB for checkpoint.keep + 1 checkpoints and the final model");
}

void check_device(const std::string& device, const std::string& key) {
  c10::Device d(device);  // throws on a malformed string
  if (d.is_cuda() && !torch::cuda::is_available())
    throw std::runtime_error(key + " is '" + device +
                             "' but this libtorch has no usable CUDA device; use " + key + "=cpu");
  if (d.is_cuda() && d.has_index() && d.index() >= static_cast<int>(torch::cuda::device_count()))
    throw std::runtime_error(key + " is '" + device + "' but only " +
                             std::to_string(torch::cuda::device_count()) + " CUDA devices exist");
}

}  // namespace asyncrl

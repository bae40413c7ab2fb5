#include "apps/asyncrl/run_setup.hpp"

#include <ATen/Parallel.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <thread>

#include "runtime/common/progress.hpp"
#include "runtime/config/run_config.hpp"
#include "runtime/model/model_config.hpp"
#include "runtime/model/model_io.hpp"
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
  check_placement(cfg);
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

namespace {

std::string bytes_text(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024 && u < 5) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", b, units[u]);
  return buf;
}

// A number from a one-line file ("max" or unreadable: 0).
uint64_t read_u64(const std::string& path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v == "max") return 0;
  try {
    return std::stoull(v);
  } catch (const std::exception&) {
    return 0;
  }
}

// What sizes the model, by the keys a user changes.
std::string model_description(const run_config& cfg, const model_config& mc) {
  char params[32];
  std::snprintf(params, sizeof(params), "%.2f B", double(mc.num_parameters()) / 1e9);
  const std::string dims = "hidden_size " + std::to_string(mc.hidden_size) +
                           ", intermediate_size " + std::to_string(mc.intermediate_size) +
                           ", num_hidden_layers " + std::to_string(mc.num_hidden_layers) +
                           ", vocab_size " + std::to_string(mc.vocab_size);
  const std::string where = cfg.model.path.empty()
                                ? "model.init (" + dims + ")"
                                : "model.path " + cfg.model.path + " (config.json: " + dims + ")";
  return where + " has " + params + " parameters";
}

std::string model_advice(const run_config& cfg) {
  return std::string(cfg.model.path.empty() ? "make the model smaller (model.init.hidden_size, "
                                              "model.init.intermediate_size, "
                                              "model.init.num_hidden_layers), "
                                            : "choose a smaller model.path, ") +
         "lower rollout.num_workers, use trainer.precision=bf16 and rollout.dtype=bf16, or a GPU "
         "(runtime.device=cuda)";
}

}  // namespace

uint64_t host_memory_available() {
  uint64_t avail = 0;
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") {
      avail = kb << 10;
      break;
    }
  // cgroup v2: the limit of this process's group, less what it already uses.
  const auto limit = read_u64("/sys/fs/cgroup/memory.max");
  const auto used = read_u64("/sys/fs/cgroup/memory.current");
  if (limit > 0) {
    const auto left = limit > used ? limit - used : 0;
    if (avail == 0 || left < avail) avail = left;
  }
  return avail;
}

void check_model_fits(const run_config& cfg, const model_config& mc, uint64_t host_available,
                      int64_t rollouters, bool with_trainer) {
  if (host_available == 0) return;
  const double p = static_cast<double>(mc.num_parameters());
  // Lower bounds: weights, gradients and AdamW's two moments at the trainer's width (bf16 may
  // keep float32 moments or master weights, which only adds); activations are not counted.
  const double trainer_width = cfg.trainer.precision == train_precision::float64 ? 8
                               : cfg.trainer.precision == train_precision::bf16  ? 2
                                                                                 : 4;
  const double rollout_width = cfg.rollout.dtype == rollout_dtype::bf16 ? 2 : 4;
  // Every data-parallel rank started here on the CPU holds a whole trainer (only the AdamW
  // moments shrink with trainer.shard_optimizer; not counted).
  int64_t cpu_ranks = 0;
  const int64_t local_ranks = data_parallel_ranks(cfg.trainer) - cfg.trainer.remote_ranks;
  for (int64_t r = 0; r < local_ranks; ++r)
    cpu_ranks += (cfg.trainer.devices.empty() ? trainer_device(cfg.trainer, cfg.runtime)
                                              : cfg.trainer.devices[r]) == "cpu";
  const bool trainer_here = with_trainer && cpu_ranks > 0;
  const bool rollouts_here = rollout_device(cfg.rollout, cfg.runtime) == "cpu";
  const bool own_here = cfg.runtime.device == "cpu";
  const double trainer = trainer_here ? double(cpu_ranks) * 4 * trainer_width * p : 0;
  const double rollout = rollouts_here ? double(rollouters) * rollout_width * p : 0;
  const double own = own_here ? 4 * p : 0;
  const double need = trainer + rollout + own;
  if (need <= static_cast<double>(host_available)) return;
  std::string parts;
  auto add = [&](double b, const std::string& what) {
    if (b <= 0) return;
    parts += (parts.empty() ? "" : ", ") + what + " " + bytes_text(b);
  };
  add(trainer, std::to_string(cpu_ranks) + " trainer rank(s) (trainer.precision " +
                   std::string(to_string(cfg.trainer.precision)) +
                   ": weights, gradients, AdamW state)");
  add(rollout, std::to_string(rollouters) + " rollouter(s) (rollout.num_workers, rollout.dtype " +
                   std::string(to_string(cfg.rollout.dtype)) + ")");
  add(own, "the run's own copy (runtime.device cpu)");
  throw std::runtime_error(
      "the model does not fit in host memory: " + model_description(cfg, mc) +
      "; they need at least " + bytes_text(need) + " (" + parts + "), and this machine has " +
      bytes_text(static_cast<double>(host_available)) + " available. To fit, " + model_advice(cfg));
}

void model_did_not_fit(const run_config& cfg, const model_config& mc, const std::string& why) {
  throw std::runtime_error("the model does not fit: " + model_description(cfg, mc) +
                           ", and allocating it failed (" + why + "). To fit, " +
                           model_advice(cfg));
}

model_bundle load_fitting_policy(const run_config& cfg, c10::Device device, int64_t rollouters,
                                 bool with_trainer) {
  const auto mc = peek_model_config(cfg.model);
  check_model_fits(cfg, mc, host_memory_available(), rollouters, with_trainer);
  try {
    return load_or_init_policy(cfg.model, cfg.runtime.seed, device);
  } catch (const std::bad_alloc& e) {
    model_did_not_fit(cfg, mc, e.what());
  } catch (const c10::Error& e) {
    // CPU: "DefaultCPUAllocator: can't allocate memory"; CUDA: "CUDA out of memory".
    const std::string what = e.what_without_backtrace();
    if (what.find("out of memory") == std::string::npos &&
        what.find("can't allocate memory") == std::string::npos)
      throw;
    model_did_not_fit(cfg, mc, what.substr(0, what.find('\n')));
  }
}

void check_placement(const run_config& cfg) {
  const auto& tr = cfg.trainer;
  const auto& ro = cfg.rollout;
  for (size_t i = 0; i < tr.devices.size(); ++i)
    check_device(tr.devices[i], "trainer.devices[" + std::to_string(i) + "]");
  for (size_t i = 0; i < ro.devices.size(); ++i)
    check_device(ro.devices[i], "rollout.devices[" + std::to_string(i) + "]");
  const int64_t ranks = data_parallel_ranks(tr);
  auto rank_device = [&](int64_t r) {
    return tr.devices.empty() ? trainer_device(tr, cfg.runtime) : tr.devices[r];
  };
  auto worker_device = [&](int64_t w) {
    return ro.devices.empty() ? rollout_device(ro, cfg.runtime) : ro.devices[w % ro.devices.size()];
  };
  std::string ranks_text, workers_text, shared;
  for (int64_t r = 0; r < ranks; ++r)
    ranks_text += (r ? ", " : "") + rank_device(r);
  for (int64_t w = 0; w < ro.num_workers; ++w)
    workers_text += (w ? ", " : "") + worker_device(w);
  for (int64_t r = 0; r < ranks; ++r) {
    std::string on;
    for (int64_t w = 0; w < ro.num_workers; ++w)
      if (worker_device(w) == rank_device(r)) on += (on.empty() ? "" : ", ") + std::to_string(w);
    if (!on.empty())
      shared += (shared.empty() ? "" : "; ") + rank_device(r) + ": trainer rank " +
                std::to_string(r) + " and rollouter(s) " + on;
  }
  // A CPU-only run of one rank shares the CPU as it always did: nothing to say.
  if (ranks > 1 || !tr.devices.empty() || !ro.devices.empty() ||
      (!shared.empty() && rank_device(0) != "cpu"))
    spdlog::info("placement: trainer rank(s) on [{}], rollouter(s) on [{}]{}", ranks_text,
                 workers_text, shared.empty() ? std::string() : "; colocated on " + shared);
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

#include "actors/run_checkpoint.hpp"

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include <stdexcept>

#include "messages/type_ids.hpp"
#include "runtime/checkpoint/checkpoint_file.hpp"

namespace asyncrl {

namespace {

constexpr const char* kRun = "run";
constexpr const char* kTrainer = "trainer";
constexpr const char* kConfig = "config";

run_state decode_run(const checkpoint_file& f, const std::string& path) {
  auto need = [&](const char* name) -> const std::string& {
    auto it = f.sections.find(name);
    if (it == f.sections.end()) throw checkpoint_error(path + ": no '" + name + "' section");
    return it->second;
  };
  const auto& bytes = need(kRun);
  run_state rs;
  caf::binary_deserializer src{nullptr, bytes.data(), bytes.size()};
  if (auto err = src(rs))
    throw checkpoint_error(path + ": the run state does not decode: " + caf::to_string(err));
  rs.trainer.state = need(kTrainer);
  if (rs.step != f.step)
    throw checkpoint_error(path + ": the run state is for step " + std::to_string(rs.step) +
                           ", the file for step " + std::to_string(f.step));
  return rs;
}

}  // namespace

std::string write_run_checkpoint(const std::string& dir, int64_t keep, const run_state& rs,
                                 const std::string& config_yaml) {
  checkpoint_file f;
  f.step = rs.step;
  auto copy = rs;
  f.sections[kTrainer] = std::move(copy.trainer.state);
  copy.trainer.state.clear();
  std::vector<char> buf;
  caf::binary_serializer sink{nullptr, buf};
  if (auto err = sink(copy))
    throw std::runtime_error("checkpoint: the run state does not serialize: " +
                             caf::to_string(err));
  f.sections[kRun] = std::string(buf.begin(), buf.end());
  f.sections[kConfig] = config_yaml;
  write_checkpoint(dir, f, keep);
  return checkpoint_path(dir, rs.step);
}

std::optional<resume_point> load_resume_point(const std::string& dir,
                                              std::vector<std::string>* skipped) {
  // Newest first; a file that verifies but does not decode is skipped like a corrupt one.
  auto files = list_checkpoints(dir);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    try {
      auto f = read_checkpoint(*it);
      resume_point p;
      p.path = *it;
      p.run = decode_run(f, *it);
      p.config_yaml = f.sections.count(kConfig) ? f.sections.at(kConfig) : std::string();
      return p;
    } catch (const std::exception& e) {
      if (skipped) skipped->push_back(e.what());
    }
  }
  return std::nullopt;
}

}  // namespace asyncrl

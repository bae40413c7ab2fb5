// policy_trainer::save_state / load_state: the trainer's exact state as one torch archive
// (torch's zip/pickle format, tensors bit for bit in their own dtype). Keys:
//   format                      int, kTrainerStateFormat
//   steps_taken, version        int: the lr-schedule position and the weights' version
//   policy, old, reference      archives: "names" (list of str) and tensors "0".."n-1", in
//                               ordered_parameters() order; old and reference only when the
//                               trainer holds them (policy_trainer::needs_old, needs_ref)
//   optimizer                   archive: policy_optimizer::save (AdamW state, step/skip counts)
// Tensors are keyed by index, not name: archive keys become TorchScript attribute names, and
// parameter names contain dots.

#include <torch/serialize/archive.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/train/dp_commands.hpp"
#include "runtime/train/grad_reducer.hpp"
#include "runtime/train/policy_trainer.hpp"
#include "runtime/train/policy_weights.hpp"
#include "runtime/train/sharded_optimizer.hpp"

namespace asyncrl {

namespace {

constexpr int64_t kTrainerStateFormat = 1;

using torch::serialize::InputArchive;
using torch::serialize::OutputArchive;

struct saved_model {
  std::vector<std::string> names;
  std::vector<at::Tensor> tensors;
};

void save_model(OutputArchive& ar, const char* key, const CausalLM& m) {
  OutputArchive sub(ar.compilation_unit());
  c10::List<std::string> names;
  const auto params = m->ordered_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    names.push_back(params[i].first);
    sub.write(std::to_string(i), params[i].second.detach(), /*is_buffer=*/true);
  }
  sub.write("names", c10::IValue(names));
  ar.write(key, sub);
}

saved_model read_model(InputArchive& ar, const char* key) {
  InputArchive sub;
  ar.read(key, sub);
  c10::IValue names;
  sub.read("names", names);
  saved_model out;
  for (const auto& n : names.toListRef())
    out.names.push_back(n.toStringRef());
  for (size_t i = 0; i < out.names.size(); ++i) {
    at::Tensor t;
    sub.read(std::to_string(i), t, /*is_buffer=*/true);
    out.tensors.push_back(t);
  }
  return out;
}

std::string shape_text(at::IntArrayRef s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i)
    out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// Every tensor of `m` has a twin of the same name, shape and dtype in `saved`, and `saved` has
// nothing more. Names the first tensor that does not.
void check_model(const char* key, const saved_model& saved, const CausalLM& m) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < saved.names.size(); ++i)
    index.emplace(saved.names[i], i);
  const auto params = m->ordered_parameters();
  const std::string what = std::string("trainer state: ") + key + " tensor '";
  for (const auto& [name, p] : params) {
    auto it = index.find(name);
    if (it == index.end())
      throw std::runtime_error(what + name + "' is in this trainer but not in the state");
    const auto& t = saved.tensors[it->second];
    if (t.sizes() != p.sizes())
      throw std::runtime_error(what + name + "' has shape " + shape_text(t.sizes()) +
                               " in the state, " + shape_text(p.sizes()) + " in this trainer");
    if (t.scalar_type() != p.scalar_type())
      throw std::runtime_error(what + name + "' has dtype " + c10::toString(t.scalar_type()) +
                               " in the state, " + c10::toString(p.scalar_type()) +
                               " in this trainer");
  }
  if (saved.names.size() != params.size()) {
    std::unordered_map<std::string, bool> here;
    for (const auto& item : params)
      here.emplace(item.first, true);
    for (const auto& name : saved.names)
      if (here.count(name) == 0)
        throw std::runtime_error(what + name + "' is in the state but not in this trainer");
    throw std::runtime_error(std::string("trainer state: ") + key + " has a repeated tensor name");
  }
}

void copy_into(const saved_model& saved, const CausalLM& m) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < saved.names.size(); ++i)
    index.emplace(saved.names[i], i);
  at::NoGradGuard ng;
  for (auto& [name, p] : m->ordered_parameters())
    p.copy_(saved.tensors[index.at(name)]);
}

int64_t read_int(InputArchive& ar, const char* key) {
  c10::IValue v;
  ar.read(key, v);
  return v.toInt();
}

void check_format(InputArchive& ar) {
  const int64_t format = read_int(ar, "format");
  if (format != kTrainerStateFormat)
    throw std::runtime_error("trainer state: format " + std::to_string(format) +
                             " unsupported (this build reads " +
                             std::to_string(kTrainerStateFormat) + ")");
}

}  // namespace

int64_t load_policy_from_trainer_state(const std::string& trainer_state, const CausalLM& model) {
  try {
    std::istringstream in(trainer_state);
    InputArchive ar;
    ar.load_from(in);
    check_format(ar);
    const auto policy = read_model(ar, "policy");
    check_model("policy", policy, model);
    copy_into(policy, model);
    return read_int(ar, "version");
  } catch (const c10::Error& e) {
    throw std::runtime_error(std::string("trainer state: unreadable: ") +
                             e.what_without_backtrace());
  }
}

std::string policy_trainer::save_state() const {
  if (tokens_ != 0 || samples_ != 0)
    throw std::logic_error("policy_trainer::save_state: " + std::to_string(samples_) +
                           " samples are accumulated but not stepped; save between steps");
  if (cmds_ && sharded_) cmds_->save();  // the other ranks join the gather below
  OutputArchive ar;
  ar.write("format", c10::IValue(kTrainerStateFormat));
  ar.write("steps_taken", c10::IValue(steps_taken_));
  ar.write("version", c10::IValue(version_));
  save_model(ar, "policy", policy_);
  if (old_) save_model(ar, "old", old_);
  if (ref_) save_model(ar, "reference", ref_);
  OutputArchive opt(ar.compilation_unit());
  if (sharded_)
    sharded_->save(opt);  // collective: gathers every rank's shard
  else
    optimizer_->save(opt);
  ar.write("optimizer", opt);
  std::ostringstream out;
  ar.save_to(out);
  return out.str();
}

void policy_trainer::load_state(const std::string& bytes) {
  if (cmds_) {
    std::string copy = bytes;  // broadcast needs a mutable buffer
    cmds_->load(copy);         // the other ranks load the same bytes
  }
  try {
    std::istringstream in(bytes);
    InputArchive ar;
    ar.load_from(in);
    check_format(ar);
    const int64_t steps_taken = read_int(ar, "steps_taken");
    const int64_t version = read_int(ar, "version");
    const auto policy = read_model(ar, "policy");
    // A frozen copy this trainer does not hold is skipped; one it holds must be in the state.
    auto frozen = [&](const char* key, const CausalLM& m) {
      saved_model out;
      if (!m) return out;
      InputArchive probe;
      if (!ar.try_read(key, probe))
        throw std::runtime_error(std::string("trainer state: no '") + key +
                                 "' model: saved by a trainer whose loss did not read it");
      out = read_model(ar, key);
      check_model(key, out, m);
      return out;
    };
    check_model("policy", policy, policy_);
    const auto old = frozen("old", old_);
    const auto ref = frozen("reference", ref_);
    InputArchive opt;
    ar.read("optimizer", opt);
    if (sharded_)
      sharded_->load(opt);  // keeps this rank's shard of the whole state
    else
      optimizer_->load(opt);  // checks before it replaces: the last step that can throw

    copy_into(policy, policy_);
    if (old_) copy_into(old, old_);
    if (ref_) copy_into(ref, ref_);
    steps_taken_ = steps_taken;
    version_ = version;
  } catch (const c10::Error& e) {
    throw std::runtime_error(std::string("trainer state: unreadable: ") +
                             e.what_without_backtrace());
  }
  // A gradient pending here belongs to weights that are gone.
  discard_pending();
}

void policy_trainer::discard_pending() {
  if (cmds_) cmds_->discard();
  // A sum over the ranks already issued is waited for (every rank issued it) and dropped.
  if (reducer_ && reducer_->started()) finish_reduction();
  at::NoGradGuard ng;
  for (auto& g : grad64_)
    g.zero_();
  for (auto& g : grad64_lo_)
    g.zero_();
  zero_grad();
  first_in_grad_ = false;
  clear_minibatch_sums();
}

}  // namespace asyncrl

#pragma once

// The states the roles run through, as enums with one spelling each (runtime/common/
// enum_names.hpp): the debug log names every change, and the trainer and the synchronizer
// report theirs to the controller, whose watchdog diagnosis and console `status` show them.

#include <caf/meta/type_name.hpp>

#include <cstdint>

#include "runtime/common/enum_names.hpp"

namespace asyncrl {

/// The behaviour a rollouter runs (see the diagram in actors/rollouter.hpp).
enum class rollouter_state : uint8_t {
  idle,
  generating,
  interrupted,
  syncing,
  resuming,
  waiting_env,  // nothing to generate; episodes wait for their environment's answer
};
inline constexpr enum_name<rollouter_state> rollouter_state_names[] = {
    {rollouter_state::idle, "idle"},
    {rollouter_state::generating, "generating"},
    {rollouter_state::interrupted, "interrupted"},
    {rollouter_state::syncing, "syncing"},
    {rollouter_state::resuming, "resuming"},
    {rollouter_state::waiting_env, "waiting_env"}};
constexpr const auto& enum_names(rollouter_state) {
  return rollouter_state_names;
}

/// Where the trainer is in its run. It trains until one of three ends; after any of them it
/// consumes no more groups, refuses live settings, and a pull still out only counts its groups.
enum class trainer_phase : uint8_t {
  training,     // pulling groups and stepping
  done,         // reached trainer.total_steps (the controller got done_atom)
  interrupted,  // checkpointed at the last boundary for an interrupt; a stop follows
  stopping,     // the controller's stop arrived: waiting for the groups delivered before it
};
inline constexpr enum_name<trainer_phase> trainer_phase_names[] = {
    {trainer_phase::training, "training"},
    {trainer_phase::done, "done"},
    {trainer_phase::interrupted, "interrupted"},
    {trainer_phase::stopping, "stopping"}};
constexpr const auto& enum_names(trainer_phase) {
  return trainer_phase_names;
}

/// What the synchronizer is doing; a publish or a join that arrives while not idle waits.
enum class sync_activity : uint8_t { idle, syncing, joining };
inline constexpr enum_name<sync_activity> sync_activity_names[] = {
    {sync_activity::idle, "idle"},
    {sync_activity::syncing, "syncing"},
    {sync_activity::joining, "joining"}};
constexpr const auto& enum_names(sync_activity) {
  return sync_activity_names;
}

/// The trainer's phase at a change, and the steps it had completed then.
struct trainer_status {
  trainer_phase phase = trainer_phase::training;
  int64_t step = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trainer_status& x) {
  return f(caf::meta::type_name("trainer_status"), x.phase, x.step);
}

/// The synchronizer's activity at a change, and the weights version it moves: the version a
/// sync loads, the one a joining rollouter gets, the last loaded when idle.
struct sync_status {
  sync_activity activity = sync_activity::idle;
  int64_t version = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sync_status& x) {
  return f(caf::meta::type_name("sync_status"), x.activity, x.version);
}

}  // namespace asyncrl

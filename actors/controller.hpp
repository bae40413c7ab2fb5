#pragma once

// The controller: the supervisor of a run. It spawns and wires the roles, owns the data loader
// (epochs, shuffling, position, prompts sent back for regeneration), writes
// <run_dir>/metrics.jsonl and the progress line, monitors every child, and shuts everything
// down in order at the end (or on the first failure), gathering each role's final counts for
// the no-sample-lost accounting.

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/env.hpp"
#include "messages/checkpoint.hpp"
#include "messages/interfaces.hpp"
#include "runtime/common/cpu_time.hpp"
#include "runtime/task/dataset.hpp"

namespace asyncrl {

class dp_leader;

struct controller_args {
  env_ptr env;
  weight_snapshot initial;        // version 0 for every role
  std::vector<qa_example> train;  // the training split
  std::vector<qa_example> test;   // eval.every_steps evaluates on it
  std::string run_dir;            // metrics.jsonl and ledger.json go here; empty = no files
  bool show_progress = true;
  std::string checkpoint_dir;  // empty = no checkpoints
  std::string config_yaml;     // the resolved config, saved in every checkpoint
  bool tensorboard = false;    // runtime.tensorboard: events files in <run_dir>/tensorboard/
  // Without TLS, what a console or worker in another process must present (run.secret in the
  // run directory, mode 0600: only its owner can read it). Empty: none asked (TLS, or tests).
  std::string secret;
  std::optional<run_state> resume;  // continue from this checkpoint (run.trainer.state set)
  // Rank 0 of the trainer's data-parallel group, asked for when the run starts (run_atom: by
  // then every rank joined) and handed to the trainer; empty, or null: one rank.
  std::function<std::shared_ptr<dp_leader>()> data_parallel;
  // A trainer rank on another machine asks for its place (trainer-rank --connect), once its
  // secret was checked: its rank and where the group meets, or why not. Called on the
  // controller's thread while the run waits for its ranks. Empty: no rank may join from
  // elsewhere.
  std::function<caf::expected<rank_setup>(const std::string& host, int32_t pid)> admit_rank;
};

controller_actor spawn_controller(caf::actor_system& sys, controller_args args);

}  // namespace asyncrl

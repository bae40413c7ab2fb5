#pragma once

// Type IDs and atoms of every message asyncrl's actors exchange. Registering the block with
// `register_message_types(cfg)` lets any of them cross a node boundary.

#include <caf/actor_system_config.hpp>
#include <caf/type_id.hpp>

#include <vector>

#include "messages/checkpoint.hpp"
#include "messages/cluster.hpp"
#include "messages/console.hpp"
#include "messages/episodes.hpp"
#include "messages/payloads.hpp"
#include "messages/run_result.hpp"
#include "messages/weights.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(asyncrl, caf::first_custom_type_id)
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::prompt_task))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<asyncrl::prompt_task>))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::scored_sample))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::scored_group))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<asyncrl::scored_group>))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::rollout_progress))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::queue_stats))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::delivery))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::sync_report))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::step_report))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::rollout_counts))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<asyncrl::rollout_counts>))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::reward_counts))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::trainer_counts))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::weight_snapshot))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::run_result))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<int32_t>))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<float>))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<char>))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::trainer_checkpoint))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::loader_state))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::run_state))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<uint64_t>))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::join_request))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::join_reply))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::rank_join_request))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::rank_setup))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::weight_chunk))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::weight_broadcast))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::console_request))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::console_reply))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::live_settings))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::admission_params))
CAF_ADD_TYPE_ID(asyncrl, (std::vector<int64_t>))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::trainer_status))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::sync_status))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::env_call))
CAF_ADD_TYPE_ID(asyncrl, (asyncrl::env_answer))
CAF_END_TYPE_ID_BLOCK(asyncrl)

CAF_ADD_ATOM(asyncrl, asyncrl, start_atom, "start")
CAF_ADD_ATOM(asyncrl, asyncrl, gen_atom, "gen")
CAF_ADD_ATOM(asyncrl, asyncrl, pause_atom, "pause")
CAF_ADD_ATOM(asyncrl, asyncrl, load_atom, "load")
CAF_ADD_ATOM(asyncrl, asyncrl, resume_atom, "resume")
CAF_ADD_ATOM(asyncrl, asyncrl, stop_atom, "stop")
CAF_ADD_ATOM(asyncrl, asyncrl, stats_atom, "stats")
CAF_ADD_ATOM(asyncrl, asyncrl, score_atom, "score")
CAF_ADD_ATOM(asyncrl, asyncrl, put_atom, "put")
CAF_ADD_ATOM(asyncrl, asyncrl, pull_atom, "pull")
CAF_ADD_ATOM(asyncrl, asyncrl, credit_atom, "credit")
CAF_ADD_ATOM(asyncrl, asyncrl, abandon_atom, "abandon")
CAF_ADD_ATOM(asyncrl, asyncrl, publish_atom, "publish")
CAF_ADD_ATOM(asyncrl, asyncrl, synced_atom, "synced")
CAF_ADD_ATOM(asyncrl, asyncrl, prompts_atom, "prompts")
CAF_ADD_ATOM(asyncrl, asyncrl, dropped_atom, "dropped")
CAF_ADD_ATOM(asyncrl, asyncrl, apply_atom, "apply")
CAF_ADD_ATOM(asyncrl, asyncrl, lost_atom, "lost")
CAF_ADD_ATOM(asyncrl, asyncrl, snapshot_atom, "snapshot")
CAF_ADD_ATOM(asyncrl, asyncrl, respawn_atom, "respawn")
CAF_ADD_ATOM(asyncrl, asyncrl, retry_atom, "retry")
CAF_ADD_ATOM(asyncrl, asyncrl, checkpoint_atom, "checkpoint")
CAF_ADD_ATOM(asyncrl, asyncrl, interrupt_atom, "interrupt")
CAF_ADD_ATOM(asyncrl, asyncrl, requeue_atom, "requeue")
CAF_ADD_ATOM(asyncrl, asyncrl, progress_atom, "progress")
CAF_ADD_ATOM(asyncrl, asyncrl, report_atom, "report")
CAF_ADD_ATOM(asyncrl, asyncrl, done_atom, "done")
CAF_ADD_ATOM(asyncrl, asyncrl, final_atom, "final")
CAF_ADD_ATOM(asyncrl, asyncrl, run_atom, "run")
CAF_ADD_ATOM(asyncrl, asyncrl, fail_atom, "fail")
CAF_ADD_ATOM(asyncrl, asyncrl, watchdog_atom, "watchdog")
CAF_ADD_ATOM(asyncrl, asyncrl, join_atom, "join")
CAF_ADD_ATOM(asyncrl, asyncrl, stage_atom, "stage")
CAF_ADD_ATOM(asyncrl, asyncrl, launch_atom, "launch")
CAF_ADD_ATOM(asyncrl, asyncrl, members_atom, "members")
CAF_ADD_ATOM(asyncrl, asyncrl, settle_atom, "settle")
CAF_ADD_ATOM(asyncrl, asyncrl, leave_atom, "leave")
CAF_ADD_ATOM(asyncrl, asyncrl, console_atom, "console")
CAF_ADD_ATOM(asyncrl, asyncrl, set_atom, "set")
CAF_ADD_ATOM(asyncrl, asyncrl, hold_atom, "hold")
CAF_ADD_ATOM(asyncrl, asyncrl, hang_atom, "hang")
CAF_ADD_ATOM(asyncrl, asyncrl, delay_atom, "delay")
CAF_ADD_ATOM(asyncrl, asyncrl, kill_atom, "kill")
CAF_ADD_ATOM(asyncrl, asyncrl, activity_atom, "activity")
CAF_ADD_ATOM(asyncrl, asyncrl, link_atom, "link")
CAF_ADD_ATOM(asyncrl, asyncrl, env_atom, "env")
CAF_ADD_ATOM(asyncrl, asyncrl, due_atom, "due")
CAF_ADD_ATOM(asyncrl, asyncrl, refill_atom, "refill")
CAF_ADD_ATOM(asyncrl, asyncrl, started_atom, "started")

namespace asyncrl {

/// Adds asyncrl's message types (and CAF's I/O types) to a config; call on every node.
inline void register_message_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::asyncrl>();
}

}  // namespace asyncrl

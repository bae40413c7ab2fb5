#pragma once

// The typed interface of each role. Every message an actor accepts, including the ones it
// sends itself, is listed here; a behaviour handles the whole interface in every state.

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "messages/type_ids.hpp"

namespace asyncrl {

/// Generates groups of responses; states idle, generating, interrupted, syncing, resuming.
using rollouter_actor = caf::typed_actor<
    caf::reacts_to<start_atom>,  // begin pulling work
    caf::reacts_to<gen_atom>,    // (self) one decode chunk
    // Pause and resume carry the sync attempt's token: each pause is matched by the resume of
    // the same token, in whichever order the two arrive.
    caf::replies_to<pause_atom, int64_t>::with<int64_t>,  // stop at a token boundary (or drain)
    caf::replies_to<load_atom, weight_snapshot>::with<int64_t>,  // load weights -> version
    caf::reacts_to<resume_atom, int64_t>,                        // continue under the new weights
    caf::reacts_to<apply_atom>,           // (self) a delayed load is due (faults.sync_delay_every)
    caf::reacts_to<set_atom, double>,     // the console: rollout.temperature for new groups
    caf::reacts_to<delay_atom, int64_t>,  // the console: delay the next load by this many ms
    caf::replies_to<stop_atom>::with<rollout_counts>>;

/// A rollouter's environment pool (actors/env_pool.hpp): answers each model turn of a
/// multi-turn episode, retrying a failed environment by replaying the episode's record; fails
/// (quits with an error) when more than env.max_failure_rate of its recent calls failed.
using env_pool_actor =
    caf::typed_actor<caf::replies_to<env_atom, env_call>::with<env_answer>,
                     caf::reacts_to<due_atom, uint64_t>,          // (self) a delayed answer is due
                     caf::replies_to<stop_atom>::with<int64_t>>;  // -> calls answered

/// One scoring worker of the Reward pool. A score call carries the decoded response, the
/// ground truth, the uid, then what only reward.function=external sends its scorer: the decoded
/// prompt ("" otherwise), the group id, the prompt's index in the data and the sample's index
/// in its group.
using reward_worker_actor =
    caf::typed_actor<caf::replies_to<score_atom, std::string, std::string, uint64_t, std::string,
                                     uint64_t, uint64_t, uint32_t>::with<double>,
                     caf::replies_to<stop_atom>::with<int64_t>>;

/// Scores generated groups and forwards them, with advantages, to the queue.
/// A stop names how many groups the rollouters sent; it is answered once all have arrived.
/// A settle names a rollouter incarnation that is gone (crashed, killed, cut off): it answers
/// with the group ids received from it and the groups received from its worker id over all
/// incarnations, and drops anything that incarnation sends afterwards (fenced).
using reward_actor = caf::typed_actor<
    caf::reacts_to<score_atom, scored_group>,
    caf::replies_to<settle_atom, caf::actor_addr, int32_t>::with<std::vector<uint64_t>, int64_t>,
    // The console: counts so far and the calls outstanding per worker; a hang of the next
    // response's scoring; a crash of the busiest worker (-> its slot).
    caf::replies_to<stats_atom>::with<reward_counts, std::vector<int64_t>>,
    caf::reacts_to<hang_atom>, caf::replies_to<kill_atom>::with<int32_t>,
    caf::reacts_to<watchdog_atom>,  // (self) the earliest call deadline may have passed
    caf::replies_to<stop_atom, int64_t>::with<reward_counts>>;

/// Bounded buffer of scored groups; grants admission credits and enforces staleness. A stop
/// names how many groups the Reward forwarded; it is answered once all have arrived.
using queue_actor = caf::typed_actor<
    caf::replies_to<credit_atom, int32_t, int64_t>::with<int64_t>,  // worker, wanted groups
    caf::reacts_to<abandon_atom, int32_t, int64_t>,  // worker, admitted groups never finished
    caf::reacts_to<put_atom, scored_group>,
    caf::replies_to<pull_atom, int64_t, int64_t, int64_t>::with<delivery>,  // version, min, max
    // The trainer consumed n filtered groups and wants m in their place (algorithm.refill).
    caf::reacts_to<refill_atom, int64_t, int64_t>,
    // stale_policy wait: worker, group id, the rollouter's policy version when the group began
    // (-1: it will not be finished, the rollouter stops).
    caf::reacts_to<started_atom, int32_t, uint64_t, int64_t>,
    caf::reacts_to<synced_atom, int64_t>,  // new weights are on every rollouter
    // A rollouter incarnation is gone (crashed, lost, removed); its worker id had completed this
    // many groups in all: the rest of what it was granted will never arrive (the controller
    // regenerates those prompts). That incarnation is fenced: a credit request or an abandon it
    // sent before it died, still on its way (a remote one may even live on), changes nothing.
    caf::reacts_to<lost_atom, int32_t, int64_t, caf::actor_addr>,
    caf::replies_to<snapshot_atom>::with<delivery>,  // a copy of the queued groups + counters
    caf::reacts_to<members_atom, int32_t>,       // rollouters now alive (their shares of a window)
    caf::reacts_to<set_atom, admission_params>,  // the trainer: new rules from its next pull
    caf::reacts_to<hold_atom, bool>,             // the console: stop / restart admission
    caf::replies_to<stats_atom>::with<queue_stats>,
    caf::replies_to<stop_atom, int64_t>::with<queue_stats>>;

/// Publishes versioned weights to every rollouter: pause -> load -> resume.
/// A crashed rollouter is replaced through the synchronizer, which knows the current weights:
/// respawn answers with the new rollouter (a caf::actor handle of a rollouter_actor).
/// Remote rollouters (on `asyncrl worker` nodes) are admitted with join: the node's agent gets
/// the current weights in chunks, then launches its rollouters, whose handles are the answer.
/// A node that fails a step of a sync (a deadline, an error) is reported to the controller
/// (lost_atom) and left out; leave removes rollouters that are gone.
using synchronizer_actor = caf::typed_actor<
    caf::replies_to<publish_atom, weight_snapshot>::with<sync_report>,
    caf::replies_to<respawn_atom, int32_t>::with<caf::actor>,
    // node agent, first worker id, rollouters -> their handles, in worker order; a null agent
    // adds rollouters in this process (the console's add-rollouter)
    caf::replies_to<join_atom, caf::actor, int32_t, int32_t>::with<std::vector<caf::actor>>,
    caf::reacts_to<leave_atom, std::vector<int32_t>>,     // these workers are gone
    caf::reacts_to<retry_atom>,                           // (self) retry a failed sync
    caf::reacts_to<stage_atom, int64_t, std::string>,     // (self) link send n is over: error
    caf::replies_to<stop_atom>::with<int64_t, int64_t>>;  // syncs, retries

/// Consumes groups, steps the optimizer, triggers syncs. A stop names how many groups the
/// queue delivered; it is answered once all have arrived. A checkpoint request is answered (to
/// the controller, as checkpoint_atom + trainer_checkpoint) at the next step boundary where a
/// checkpoint can be taken; with interrupt_atom (a stop follows) at once when the last completed
/// step is such a boundary, dropping the step still gathering its groups, which then trains no
/// more. New live settings (the console) are adopted at the next step
/// boundary; the answer is the first step that runs under them.
using trainer_actor =
    caf::typed_actor<caf::reacts_to<start_atom>, caf::replies_to<final_atom>::with<weight_snapshot>,
                     caf::reacts_to<checkpoint_atom>,
                     caf::reacts_to<checkpoint_atom, interrupt_atom>,
                     caf::replies_to<set_atom, live_settings>::with<int64_t>,
                     caf::replies_to<stop_atom, int64_t>::with<trainer_counts>>;

/// The agent of an `asyncrl worker` process: receives weights in chunks, launches the
/// process's rollouters and loads each complete version into all of them (one copy per node).
using node_agent_actor = caf::typed_actor<
    caf::replies_to<stage_atom, weight_chunk>::with<int64_t>,  // -> bytes of the version so far
    // Launch the rollouters under a staged version -> their handles, in worker order.
    caf::replies_to<launch_atom, int64_t>::with<std::vector<caf::actor>>,
    caf::replies_to<load_atom, int64_t>::with<int64_t>,  // load a staged version -> version
    // Form the weights link at the sender's host, port, within ms -> whether it formed (false:
    // this node takes CAF chunks); then stage versions broadcast over it -> their bytes.
    caf::replies_to<link_atom, std::string, int32_t, int64_t>::with<bool>,
    caf::replies_to<stage_atom, weight_broadcast>::with<int64_t>,
    caf::reacts_to<link_atom, std::string>,            // (self) the link formed, or why not
    caf::reacts_to<stage_atom, int64_t, std::string>,  // (self) version v arrived, or why not
    caf::reacts_to<stop_atom>>;                        // the run is over

/// Wires the roles, owns the data loader and the run's output, supervises the children.
using controller_actor = caf::typed_actor<
    caf::replies_to<run_atom>::with<run_result>,
    caf::replies_to<prompts_atom, int64_t>::with<std::vector<prompt_task>>,
    // The queue dropped a group (group id, whether to generate it again).
    caf::reacts_to<dropped_atom, uint64_t, bool>, caf::reacts_to<progress_atom, rollout_progress>,
    caf::reacts_to<report_atom, step_report>, caf::reacts_to<checkpoint_atom, trainer_checkpoint>,
    caf::reacts_to<done_atom>, caf::reacts_to<fail_atom, std::string>,
    // The trainer's phase and the synchronizer's activity, at each change.
    caf::reacts_to<activity_atom, trainer_status>, caf::reacts_to<activity_atom, sync_status>,
    caf::reacts_to<interrupt_atom>,                              // SIGINT/SIGTERM: checkpoint, stop
    caf::replies_to<join_atom, join_request>::with<join_reply>,  // a worker process joins
    caf::replies_to<join_atom, rank_join_request>::with<rank_setup>,  // a trainer rank joins
    caf::reacts_to<lost_atom, caf::actor, std::string>,      // a node failed a sync step: drop it
    caf::reacts_to<requeue_atom, int32_t, caf::actor_addr>,  // (self) a rollouter died
    caf::reacts_to<watchdog_atom>,                           // (self) has a step completed lately?
    caf::replies_to<console_atom, console_request>::with<console_reply>>;  // asyncrl repl

}  // namespace asyncrl

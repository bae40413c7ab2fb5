#!/usr/bin/env bash
# Multi-process tests of networked deployment (ctest label `cluster`): `asyncrl train` with
# remote rollouters in `asyncrl worker` processes, on loopback only. Every process this script
# starts is killed on exit, and every wait is bounded.
#
# usage: cluster_test.sh ASYNCRL WORK_DIR CASE
#   accounting MODE   2 worker processes, no local rollouter: the run completes in MODE and
#                     every hop of the accounting identity holds; the ledger has each seq once
#   theorem1 [bf16]   periodic with 2 remote rollouters ends with the same weights as sync in
#                     one process (Theorem 1 across processes; generation is deterministic);
#                     bf16: with bf16 rollouts (bf16 snapshots over the network) and trainer
#                     bf16 invariant: the same with rollout.batch_invariant and batched decoding
#   kill              3 workers, one is SIGKILLed mid-run: nothing lost or trained twice
#   cutoff            3 workers, one is frozen (SIGSTOP: its connection stays open, it answers
#                     nothing): it is dropped at a request deadline or by the heartbeat timeout,
#                     and the run completes;
#                     thawed, whatever it still sends is fenced off
#   join              a worker joins a running periodic job and starts at the current version
#   tls               mutual TLS: a plain-TCP peer, an anonymous-TLS peer and a peer from
#                     another CA are refused at the handshake (and logged); one from the CA joins
#   rank_tls          a data-parallel trainer rank joins a TLS run: refused in plain TCP and from
#                     another CA, admitted with the run's CA; the run completes
#   theorem1 collective  as theorem1, with cluster.weights_transport=collective: w1's weights
#                     arrive over its Gloo link, w2 declines its link (cluster.weights_transport=caf
#                     on its command line) and gets CAF chunks; the weights still equal sync's
#   kill collective   as kill, with every worker on a weights link
#   corrupt collective  one local rollouter and a worker on a weights link whose 2nd version
#                     arrives damaged (faults.corrupt_link_every=2, the true SHA-256 by CAF): the
#                     worker refuses it, is dropped, its work regenerated; the run completes
set -euo pipefail

BIN=$(readlink -f "${1:?asyncrl binary}")
WORK=${2:?work dir}
CASE=${3:?case}
MODE=${4:-periodic}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CFG=$ROOT/configs/chaos/base.yaml
# 16 steps of the tiny chaos run; no checkpoints; quick failure if something stalls.
COMMON=(trainer.total_steps=16 checkpoint.every_steps=0 runtime.progress_timeout_s=30
        runtime.log_level=info cluster.request_timeout_ms=5000)

source "$ROOT/tests/multiprocess_lib.sh"

# `collective` as the last argument: weights reach the workers over Gloo links.
COLLECTIVE=0
if [[ " ${*:3} " == *" collective "* ]]; then
  COLLECTIVE=1
  COMMON+=(cluster.weights_transport=collective)
fi

# asyncrl_of WRAPPER_PID: the asyncrl process itself, not its timeout wrapper (sets VICTIM).
asyncrl_of() {
  VICTIM=$(pgrep -P "$1" || true)
  [[ -n "$VICTIM" ]] || fail "worker $1 is not running"
}


# wait_joined NAME: until worker NAME has started its rollouters (bounded: 30 s). A victim must
# have joined before it is killed or frozen: on a loaded machine the 5 steps this script waits for
# can pass on w1 alone while w3 is still forming its weights link, and a worker killed then is
# never counted as joined, so it cannot be counted as lost (CI, stop 46).
wait_joined() {
  for _ in $(seq 300); do grep -q "rollouter(s) started" "$WORK/$1.log" && return; sleep 0.1; done
  fail "worker $1 did not join in 30 s"
}

# check_summary RUN_DIR [min joined] [min lost]: the accounting identity, hop by hop, and the
# ledger: every schedule position trained or dropped exactly once.
check_summary() {
  python3 "$ROOT/tests/check_run.py" "$1" --joined "${2:-0}" --lost "${3:-0}"
}

case "$CASE" in
  accounting)
    start_train run rollout.num_workers=0 async_training.mode="$MODE"
    port=$(port_of "$WORK/run")
    start_worker w1 "$port"
    start_worker w2 "$port"
    wait_train
    check_summary "$WORK/run" 2 0 || fail "accounting ($MODE)"
    # Both workers leave on their own once the run is over.
    for p in "${pids[@]:1}"; do
      rc=0; wait "$p" || rc=$?
      [[ $rc -eq 0 ]] || fail "a worker exited with $rc after the run"
    done
    ;;
  theorem1)
    # `theorem1 bf16`: bf16 rollouts and trainer, so that the bf16 snapshots the workers receive
    # over the network must equal the ones the local rollouters share.
    # In bf16 a response's tokens depend on which requests share the generator's batch
    # (docs/algorithms.md section 12), and that depends on timing: one request per batch keeps
    # this case about the snapshots. `theorem1 bf16 invariant` batches again (the config's 16
    # requests) under rollout.batch_invariant, whose kernels make a response independent of its
    # batch: bitwise across processes, with rollout log-probs equal to the trainer's.
    prec=(rollout.dtype=float32 trainer.precision=float32)
    [[ ${4:-} == bf16 ]] && prec=(rollout.dtype=bf16 trainer.precision=bf16 rollout.max_batch=1)
    [[ ${5:-} == invariant ]] &&
      prec=(rollout.dtype=bf16 trainer.precision=bf16 rollout.batch_invariant=true)
    start_train sync async_training.mode=sync rollout.num_workers=2 cluster.listen=off "${prec[@]}"
    wait_train
    start_train remote async_training.mode=periodic rollout.num_workers=0 "${prec[@]}"
    port=$(port_of "$WORK/remote")
    start_worker w1 "$port"
    if [[ $COLLECTIVE == 1 ]]; then
      start_worker w2 "$port" cluster.weights_transport=caf
    else
      start_worker w2 "$port"
    fi
    wait_train
    check_summary "$WORK/remote" 2 0 || fail "accounting (theorem1)"
    if [[ $COLLECTIVE == 1 ]]; then
      # Which worker got which transport, said on both sides.
      [[ $(grep -c "over a collective link" "$WORK/remote.log") == 1 ]] ||
        fail "the controller should report exactly one worker on a collective link"
      [[ $(grep -c "it gets CAF chunks" "$WORK/remote.log") == 1 ]] ||
        fail "the controller should report exactly one worker falling back to CAF chunks"
      grep -q "weights arrive over a collective link" "$WORK/w1.log" || fail "w1 is not on its link"
      grep -q "weights come as CAF chunks" "$WORK/w2.log" || fail "w2 did not decline its link"
    fi
    a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_sha256"])' "$WORK/sync/summary.json")
    b=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_sha256"])' "$WORK/remote/summary.json")
    [[ -n "$a" && "$a" == "$b" ]] || fail "sync in one process ($a) != periodic with remote rollouters ($b)"
    # The weights moved (a run of all-zero advantages would end equal having tested nothing);
    # `invariant`: every token the remote workers sampled carries the trainer's log-prob bit for
    # bit.
    python3 - "$WORK/remote/metrics.jsonl" "${5:-}" <<'PY' || fail "theorem1: see above"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
updates = sum(m["grad_norm"] > 0 for m in lines)
print(f"{updates} of {len(lines)} steps updated")
bad, tokens = [], 1
if sys.argv[2] == "invariant":
    bad = [(m["step"], m["mismatch_abs_max"]) for m in lines if m["mismatch_abs_max"] != 0]
    tokens = sum(m["mismatch_tokens"] for m in lines)
    print(f"mismatch over {tokens} tokens: nonzero at (step, max) {bad}")
sys.exit(1 if bad or tokens == 0 or updates == 0 else 0)
PY
    echo "ok: params_sha256 $a in both"
    ;;
  kill)
    start_train run rollout.num_workers=0 trainer.total_steps=40
    port=$(port_of "$WORK/run")
    start_worker w1 "$port"
    start_worker w2 "$port"
    start_worker w3 "$port"
    wait_steps "$WORK/run" 5  # training is under way
    wait_joined w3
    asyncrl_of "$WORKER_PID"
    victim=$VICTIM
    kill -9 "$victim"
    echo "killed worker $victim after $(wc -l <"$WORK/run/metrics.jsonl") steps"
    wait_train
    check_summary "$WORK/run" 3 1 || fail "accounting after a SIGKILL"
    ;;
  corrupt)
    start_train run rollout.num_workers=1 trainer.total_steps=40 faults.corrupt_link_every=2
    port=$(port_of "$WORK/run")
    start_worker w1 "$port"
    wait_train
    grep -q "injected fault: v[0-9]* crosses the weights link damaged" "$WORK/run.log" ||
      fail "the fault never fired (did w1 join before the run ended?)"
    grep -q "does not match its SHA-256" "$WORK/run.log" ||
      fail "the damaged version was not refused by its SHA-256"
    check_summary "$WORK/run" 1 1 || fail "accounting after a damaged version"
    ;;
  cutoff)
    start_train run rollout.num_workers=0 trainer.total_steps=40
    port=$(port_of "$WORK/run")
    start_worker w1 "$port"
    start_worker w2 "$port"
    start_worker w3 "$port"
    wait_steps "$WORK/run" 5
    wait_joined w3
    asyncrl_of "$WORKER_PID"
    victim=$VICTIM
    kill -STOP "$victim"
    echo "froze worker $victim after $(wc -l <"$WORK/run/metrics.jsonl") steps"
    # Thaw it once the controller has dropped it (bounded), so that it talks again mid-run. Which
    # deadline catches it depends on the moment: a sync's request to it (cluster.request_timeout_ms
    # 5 s here), or, when no sync is due because the step waits for its groups, the middleman's
    # heartbeat timeout (10 s). Both end in on_remote_lost's "worker ... (pid N) lost".
    for _ in $(seq 300); do
      grep -q "(pid $victim) lost" "$WORK/run.log" && break
      sleep 0.1
    done
    grep -q "(pid $victim) lost" "$WORK/run.log" || fail "the frozen worker was not dropped in 30 s"
    kill -CONT "$victim"
    wait_train
    check_summary "$WORK/run" 3 1 || fail "accounting after a cut-off worker"
    ;;
  join)
    # One local rollouter; a worker joins once a few syncs have happened. Periodic is
    # on-policy: a group generated under anything but the current weights would show as a
    # delivered staleness above 0.
    # 80 steps: the worker (a second or so to start) joins well before the end, even under load.
    start_train run rollout.num_workers=1 trainer.total_steps=80
    port=$(port_of "$WORK/run")
    wait_steps "$WORK/run" 4
    at=$(wc -l <"$WORK/run/metrics.jsonl")
    start_worker w1 "$port"
    wait_train
    check_summary "$WORK/run" 1 0 || fail "accounting (join)"
    v=$(sed -n 's/.*started at weight version \([0-9]*\).*/\1/p' "$WORK/w1.log")
    [[ -n "$v" && $v -ge $at ]] || fail "the worker started at version '$v', the run was at step $at"
    python3 - "$WORK/run" <<'PY' || fail "join: the new rollouter did no work, or trained groups were stale"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
remote = [r for r in s["rollouters"] if r["worker"] >= 1]
assert remote and remote[0]["groups_completed"] > 0, s["rollouters"]
assert s["queue"]["max_delivered_staleness"] == 0, s["queue"]
print("ok: the joined rollouter generated", remote[0]["groups_completed"], "groups, staleness 0")
PY
    echo "ok: joined at version $v (the run had $at steps)"
    ;;
  tls)
    bash "$ROOT/scripts/make-certs.sh" "$WORK/ca-a" >/dev/null
    bash "$ROOT/scripts/make-certs.sh" "$WORK/ca-b" >/dev/null
    A=$WORK/ca-a
    start_train run rollout.num_workers=0 trainer.total_steps=6 cluster.tls.certificate="$A/node.pem" \
      cluster.tls.key="$A/node.key" cluster.tls.ca="$A/ca.pem"
    port=$(port_of "$WORK/run")
    # refused: plain TCP, then a certificate from another CA (each exits non-zero, bounded)
    rc=0; timeout 60 "$BIN" worker --connect "127.0.0.1:$port" >"$WORK/plain.log" 2>&1 || rc=$?
    [[ $rc -ne 0 && $rc -ne 124 ]] || fail "a plain-TCP worker was not refused (rc $rc)"
    rc=0; timeout 60 "$BIN" worker --connect "127.0.0.1:$port" --tls-dir "$WORK/ca-b" \
      >"$WORK/wrong-ca.log" 2>&1 || rc=$?
    [[ $rc -ne 0 && $rc -ne 124 ]] || fail "a worker from another CA was not refused (rc $rc)"
    # refused: anonymous TLS (no certificate, the anonymous cipher CAF uses without one)
    rc=0; timeout 20 openssl s_client -connect "127.0.0.1:$port" -tls1_2 \
      -cipher 'aNULL:@SECLEVEL=0' </dev/null >"$WORK/anon.log" 2>&1 || rc=$?
    grep -q "Cipher is (NONE)\|handshake failure\|alert" "$WORK/anon.log" ||
      fail "the anonymous TLS client was not refused"
    # accepted: the right CA; the run completes with it
    start_worker good "$port" --tls-dir "$A"
    wait_train
    check_summary "$WORK/run" 1 0 || fail "accounting (tls)"
    n=$(grep -c "refused a connection from" "$WORK/run.log" || true)
    [[ $n -ge 3 ]] || fail "the controller logged $n refusals, expected 3"
    echo "ok: 3 refusals logged, the worker with the run's CA joined"
    ;;
  rank_tls)
    # A data-parallel trainer rank joins a TLS run the way a worker does: refused without a
    # certificate and with one from another CA, admitted with the run's CA; the run completes.
    bash "$ROOT/scripts/make-certs.sh" "$WORK/ca-a" >/dev/null
    bash "$ROOT/scripts/make-certs.sh" "$WORK/ca-b" >/dev/null
    A=$WORK/ca-a
    start_train run trainer.total_steps=4 trainer.data_parallel=2 trainer.remote_ranks=1 \
      trainer.dist_timeout_s=60 cluster.tls.certificate="$A/node.pem" cluster.tls.key="$A/node.key" \
      cluster.tls.ca="$A/ca.pem"
    port=$(port_of "$WORK/run")
    rc=0; timeout 60 "$BIN" trainer-rank --connect "127.0.0.1:$port" >"$WORK/plain.log" 2>&1 || rc=$?
    [[ $rc -eq 1 ]] || fail "a plain-TCP trainer rank was not refused (rc $rc)"
    rc=0; timeout 60 "$BIN" trainer-rank --connect "127.0.0.1:$port" --tls-dir "$WORK/ca-b" \
      >"$WORK/wrong-ca.log" 2>&1 || rc=$?
    [[ $rc -eq 1 ]] || fail "a trainer rank from another CA was not refused (rc $rc)"
    rc=0; timeout 120 "$BIN" trainer-rank --connect "127.0.0.1:$port" --tls-dir "$A" \
      >"$WORK/rank1.log" 2>&1 || rc=$?
    [[ $rc -eq 0 ]] || fail "the trainer rank with the run's CA exited with $rc"
    grep -q "place given by 127.0.0.1:$port (TLS)" "$WORK/rank1.log" || fail "no TLS admission"
    wait_train
    check_summary "$WORK/run" 0 0 || fail "accounting (rank_tls)"
    echo "ok: 2 refusals, the trainer rank with the run's CA joined over TLS"
    ;;
  *)
    echo "unknown case $CASE"; exit 2 ;;
esac

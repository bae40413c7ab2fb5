#!/usr/bin/env bash
# Network partitions, not only kills (ctest label `partition`): `asyncrl train` in one network
# namespace and each `asyncrl worker` in its own, joined by veth pairs this script makes. Every
# packet stays inside those namespaces (10.213.K.0/24, K = worker); no other address is used.
# A cut is the worker's end of its veth set down: the link goes silent, with no RST and no FIN,
# as when a cable or a switch fails. Every process and namespace this script makes is removed on
# exit, and every wait is bounded.
#
# usage: partition_test.sh ASYNCRL WORK_DIR CASE
#   cut    3 workers; one is cut off for longer than every deadline (request timeout 5 s, BASP
#          heartbeat timeout 10 s), then the link heals: the controller fences it, its prompts
#          are regenerated exactly once (ledger), and the same worker process rejoins as a new
#          node whose new rollouters generate groups that are trained
#   split  the controller is cut from every worker at once (no local rollouter), then the links
#          heal: every worker rejoins and the run completes, nothing lost or trained twice
#   lossy  periodic with 2 workers, each behind a slow link that drops packets (tbf: 1 Mbit/s,
#          a queue of 20 ms, so bursts such as a weight sync overflow it): the run ends with the
#          same weights as sync in one process (Theorem 1), and the kernel counted drops
#   ranks  a data-parallel trainer over two namespaces: rank 1 joins from its own through the
#          cluster listener with the run's secret (refused without it), Gloo over the veth
#          link; a worker that joins before the run starts waits for it; the weights equal the
#          one-rank run's
#
# Needs root (network namespaces) and the veth driver; exits 77 (ctest: skipped) without them.
# tc netem is not used: the kernels this runs on lack sch_netem; tbf gives real loss and delay.
set -euo pipefail

BIN=$(readlink -f "${1:?asyncrl binary}")
WORK=${2:?work dir}
CASE=${3:?case}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CFG=$ROOT/configs/chaos/base.yaml
# The tiny chaos run. Remote rollouters only; no checkpoints; plain TCP off loopback (inside the
# namespaces) with the run's secret.
COMMON=(checkpoint.every_steps=0 runtime.progress_timeout_s=60 runtime.log_level=info
        cluster.request_timeout_ms=5000 cluster.listen=0.0.0.0:0 cluster.allow_insecure=true
        rollout.num_workers=0)

# Namespaces named after this process, so that parallel cases never collide.
P="arl$$"
NSC="${P}c"
links=()

skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "network namespaces need root"
command -v ip >/dev/null || skip "no iproute2 (ip)"
ip netns add "${P}probe" 2>/dev/null || skip "cannot create a network namespace"
if ! ip -n "${P}probe" link add dev "${P}pa" type veth peer name "${P}pb" 2>/dev/null; then
  ip netns del "${P}probe"
  skip "no veth driver"
fi
ip netns del "${P}probe"

extra_cleanup() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${P}" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
}

source "$ROOT/tests/multiprocess_lib.sh"

# make_link K: namespace ${P}wK and a veth pair to the controller's namespace, 10.213.K.1 (the
# controller's end) <-> 10.213.K.2 (the worker's).
make_link() {
  local k=$1
  ip netns add "${P}w$k"
  ip link add dev "${P}c$k" netns "$NSC" type veth peer name "${P}w$k" netns "${P}w$k"
  ip -n "$NSC" addr add "10.213.$k.1/24" dev "${P}c$k"
  ip -n "${P}w$k" addr add "10.213.$k.2/24" dev "${P}w$k"
  ip -n "$NSC" link set "${P}c$k" up
  ip -n "${P}w$k" link set "${P}w$k" up
  ip -n "${P}w$k" link set lo up
  links+=("$k")
}

# Silent cut and heal of worker K's link (its end down: the controller's end loses its carrier
# and drops what it sends; nothing is refused).
cut() { ip -n "${P}w$1" link set "${P}w$1" down; }
heal() { ip -n "${P}w$1" link set "${P}w$1" up; }

# slow_lossy K: both ends of K's link at 1 Mbit/s with a queue of 20 ms; what overflows is
# dropped.
slow_lossy() {
  tc -n "$NSC" qdisc add dev "${P}c$1" root tbf rate 1mbit burst 4kb latency 20ms
  tc -n "${P}w$1" qdisc add dev "${P}w$1" root tbf rate 1mbit burst 4kb latency 20ms
}
drops_of() {
  local a b
  a=$(tc -s -n "$NSC" qdisc show dev "${P}c$1" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
  b=$(tc -s -n "${P}w$1" qdisc show dev "${P}w$1" | sed -n 's/.*dropped \([0-9]*\).*/\1/p' | head -1)
  echo $((${a:-0} + ${b:-0}))
}

ip netns add "$NSC"
ip -n "$NSC" link set lo up

# train_in_ns NAME ARGS...: `asyncrl train` in the controller's namespace (sets TRAIN_PID).
train_in_ns() {
  local name=$1
  shift
  ip netns exec "$NSC" timeout "${TRAIN_TIMEOUT:-240}" "$BIN" train -c "$CFG" "${COMMON[@]}" \
    runtime.run_dir="$WORK/$name" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  TRAIN_PID=$!
  pids+=("$TRAIN_PID")
}

# worker_in_ns K PORT RUN ARGS...: worker K in its namespace, through its link (sets
# WORKER_PID); log $WORK/wK.log.
worker_in_ns() {
  local k=$1 port=$2 run=$3
  shift 3
  ip netns exec "${P}w$k" timeout "${TRAIN_TIMEOUT:-240}" "$BIN" worker \
    --connect "10.213.$k.1:$port" --secret-file "$WORK/$run/run.secret" "$@" \
    >"$WORK/w$k.log" 2>&1 &
  WORKER_PID=$!
  pids+=("$WORKER_PID")
}

# wait_log FILE PATTERN SECONDS: until FILE has a line matching PATTERN (grep -E), bounded.
wait_log() {
  local i
  for ((i = 0; i < $3 * 10; ++i)); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    kill -0 "$TRAIN_PID" 2>/dev/null || fail "train exited while waiting for '$2' in $1"
    sleep 0.1
  done
  fail "no '$2' in $1 after $3 s"
}

count_in() { grep -cE "$2" "$1" 2>/dev/null || true; }

# wait_count FILE PATTERN N SECONDS: until FILE has N lines matching PATTERN, bounded.
wait_count() {
  local i
  for ((i = 0; i < $4 * 10; ++i)); do
    [[ $(count_in "$1" "$2") -ge $3 ]] && return 0
    sleep 0.1
  done
  fail "$(count_in "$1" "$2") lines of '$2' in $1 after $4 s, expected $3"
}

# stop_train: SIGTERM (the run checkpoints and stops); its status is then `interrupted`.
stop_train() {
  pkill -TERM -P "$TRAIN_PID" 2>/dev/null || true
  local rc=0
  wait "$TRAIN_PID" || rc=$?
  [[ $rc -eq 0 || $rc -eq 130 || $rc -eq 143 ]] || fail "train exited with $rc after SIGTERM"
}

summary() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' \
  "$WORK/run/summary.json" "$1"; }

case "$CASE" in
  cut)
    for k in 1 2 3; do make_link "$k"; done
    # Long enough that the run is still going when the victim comes back; stopped below.
    train_in_ns run trainer.total_steps=100000
    port=$(port_of "$WORK/run")
    for k in 1 2 3; do worker_in_ns "$k" "$port" run; done
    for k in 1 2 3; do wait_log "$WORK/w$k.log" "rollouter\(s\) started" 60; done
    wait_steps "$WORK/run" 5
    victim_pid=$(pgrep -P "$WORKER_PID")
    cut 3
    echo "cut worker 3 (pid $victim_pid) off after $(steps_of "$WORK/run") steps"
    # Dropped at a request deadline (a sync to it) or the heartbeat timeout; the worker's own
    # heartbeat timeout fires too, with no packet crossing.
    wait_log "$WORK/run.log" "\(pid $victim_pid\) lost" 40
    wait_log "$WORK/w3.log" "lost the controller|the controller dropped this node" 40
    heal 3
    echo "healed after $(steps_of "$WORK/run") steps"
    # The same process joins again as a new node (a second join line with its pid), and its new
    # rollouters generate. Counted, not just found: the first join's lines are in the log too,
    # and "reconnected to" is also logged by a rejoin attempt that then fails.
    wait_count "$WORK/run.log" "\(pid $victim_pid\) joins" 2 60
    wait_count "$WORK/w3.log" "rollouter\(s\) started" 2 60
    at=$(steps_of "$WORK/run")
    wait_steps "$WORK/run" $((at + 20))
    stop_train
    [[ $(count_in "$WORK/run.log" "\(pid $victim_pid\) joins") -eq 2 ]] ||
      fail "worker 3 (pid $victim_pid) did not join twice"
    ! grep -q "worker: stopped" "$WORK/w3.log" || fail "the cut worker's process gave up"
    # Its rollouter ids: the first join's, then the rejoin's (a new incarnation, a new id).
    mapfile -t ids < <(sed -n 's/.*joined as rollouter(s) \([0-9]*\)\.\..*/\1/p' "$WORK/w3.log")
    [[ ${#ids[@]} -eq 2 && ${ids[0]} != "${ids[1]}" ]] || fail "worker 3's joins: ids '${ids[*]}'"
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status interrupted --joined 4 --lost 1 ||
      fail "accounting after a cut and a rejoin"
    python3 - "$WORK/run" "${ids[1]}" <<'PY' || fail "the rejoined node's rollouter generated nothing"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
new = [r for r in s["rollouters"] if r["worker"] == int(sys.argv[2])]
assert new and new[0]["groups_completed"] > 0, s["rollouters"]
print("ok: rejoined as rollouter", new[0]["worker"], "with", new[0]["groups_completed"], "groups")
PY
    ;;
  split)
    for k in 1 2; do make_link "$k"; done
    train_in_ns run trainer.total_steps=100000
    port=$(port_of "$WORK/run")
    for k in 1 2; do worker_in_ns "$k" "$port" run; done
    for k in 1 2; do wait_log "$WORK/w$k.log" "rollouter\(s\) started" 60; done
    wait_steps "$WORK/run" 5
    cut 1
    cut 2
    echo "cut the controller from both workers after $(steps_of "$WORK/run") steps"
    for k in 1 2; do wait_log "$WORK/w$k.log" "lost the controller|dropped this node" 40; done
    wait_count "$WORK/run.log" "cluster: worker .* lost" 2 40
    at=$(steps_of "$WORK/run")
    heal 1
    heal 2
    echo "healed both at step $at"
    # Both rejoined: a second join each ("reconnected to" alone may be an attempt that failed).
    for k in 1 2; do wait_count "$WORK/w$k.log" "rollouter\(s\) started" 2 60; done
    wait_steps "$WORK/run" $((at + 20))
    stop_train
    [[ $(count_in "$WORK/run.log" "cluster: worker .* lost") -eq 2 ]] ||
      fail "expected both workers lost once, got $(count_in "$WORK/run.log" "cluster: worker .* lost")"
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status interrupted --joined 4 --lost 2 ||
      fail "accounting after a split and a heal"
    ;;
  lossy)
    for k in 1 2; do make_link "$k"; slow_lossy "$k"; done
    # The reference: sync in one process, no network.
    train_in_ns sync async_training.mode=sync rollout.num_workers=2 cluster.listen=off \
      trainer.total_steps=16
    wait_train
    train_in_ns run async_training.mode=periodic trainer.total_steps=16 \
      cluster.request_timeout_ms=60000 async_training.sync_timeout_ms=60000
    port=$(port_of "$WORK/run")
    for k in 1 2; do worker_in_ns "$k" "$port" run; done
    wait_train
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --joined 2 || fail "accounting (lossy)"
    a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_sha256"])' "$WORK/sync/summary.json")
    b=$(summary params_sha256)
    [[ -n "$a" && "$a" == "$b" ]] || fail "sync in one process ($a) != periodic over lossy links ($b)"
    d=$(( $(drops_of 1) + $(drops_of 2) ))
    [[ $d -gt 0 ]] || fail "the links dropped no packet: the test did not test loss"
    echo "ok: params_sha256 $a in both; the links dropped $d packets"
    ;;
  ranks)
    # Two machines for the trainer: rank 0 (the train process) in the controller's namespace,
    # rank 1 in namespace w1, which reaches it only through its veth link. Rank 1 asks the
    # controller for its place (rank, config, rendezvous, token) with the run's secret, then
    # Gloo connects 10.213.1.2 and 10.213.1.1: each rank's endpoint must be its address on that
    # link, not its host name's (127.0.0.1 here, as Debian's /etc/hosts has it). A worker in w2
    # joins while the run still waits for rank 1, and is admitted when the run starts.
    # Reference: sync in one process with one rank; periodic with 2 ranks must end on the same
    # weights (Theorem 1).
    for k in 1 2; do make_link "$k"; done
    train_in_ns one async_training.mode=sync rollout.num_workers=2 cluster.listen=off \
      trainer.total_steps=8
    wait_train
    train_in_ns run trainer.total_steps=8 trainer.data_parallel=2 trainer.remote_ranks=1 \
      trainer.dist_listen=10.213.1.1:0 trainer.dist_timeout_s=60
    port=$(port_of "$WORK/run")
    worker_in_ns 2 "$port" run --rollouters 2
    wait_log "$WORK/run.log" "joins when the run starts" 60
    # refused: no secret, then a wrong one (each exits non-zero, bounded)
    for s in "" wrong; do
      rc=0
      ASYNCRL_RUN_SECRET=$s ip netns exec "${P}w1" timeout 60 "$BIN" trainer-rank \
        --connect "10.213.1.1:$port" >"$WORK/rank-refused$s.log" 2>&1 || rc=$?
      [[ $rc -ne 0 && $rc -ne 124 ]] || fail "a trainer rank without the secret was not refused ($rc)"
    done
    grep -q "must present the run's secret" "$WORK/rank-refused.log" || fail "no refusal (none)"
    grep -q "run secret is wrong" "$WORK/rank-refusedwrong.log" || fail "no refusal (wrong)"
    ip netns exec "${P}w1" timeout "${TRAIN_TIMEOUT:-240}" "$BIN" trainer-rank \
      --connect "10.213.1.1:$port" --secret-file "$WORK/run/run.secret" >"$WORK/rank1.log" 2>&1 &
    pids+=("$!")
    rank_pid=$!
    wait_train
    rc=0; wait "$rank_pid" || rc=$?
    [[ $rc -eq 0 ]] || fail "trainer rank 1 exited with $rc"
    grep -q "trainer rank 1 of 2: joined 10.213.1.1" "$WORK/rank1.log" || fail "rank 1 did not join"
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --joined 2 || fail "accounting (ranks)"
    a=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_sha256"])' "$WORK/one/summary.json")
    b=$(summary params_sha256)
    [[ -n "$a" && "$a" == "$b" ]] || fail "one rank in one process ($a) != 2 ranks on two hosts ($b)"
    echo "ok: params_sha256 $a in both; rank 1 joined from another namespace, 2 refusals"
    ;;
  *)
    echo "unknown case $CASE"; exit 2 ;;
esac

#!/usr/bin/env bash
# The kill -9 loop (ctest label `chaos`): a periodic run of configs/chaos/base.yaml is killed with
# SIGKILL at random moments and resumed with `asyncrl train --resume` each time, then resumed to
# completion. It must end with the same weights (params_sha256) as an uninterrupted run, a
# ledger without lost or duplicated schedule positions, and metrics.jsonl steps 1..N once each.
#
# usage: kill9_loop.sh ASYNCRL CONFIG WORK_DIR [SEED] [KILLS] [STEPS] [OVERRIDES...]
#   OVERRIDES: key=value for both runs (tests/kill9_tools.sh passes its warm-started model)
# Local only (no network); every process it starts is killed on exit; each command is bounded.
set -euo pipefail

BIN=${1:?asyncrl binary}
CFG=${2:?config}
WORK=${3:?work dir}
SEED=${4:-20240611}
KILLS=${5:-10}
STEPS=${6:-120}
shift $(( $# < 6 ? $# : 6 ))
RANDOM=$SEED

ARGS=(trainer.total_steps="$STEPS" checkpoint.every_steps=2 checkpoint.keep=3
      runtime.log_level=warn "$@")
REF=$WORK/reference
RUN=$WORK/killed
pid=""
cleanup() {
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$REF" "$RUN"
mkdir -p "$WORK"

echo "kill9_loop: seed $SEED, $KILLS kills, $STEPS steps, config $CFG"
t0=$SECONDS
# The reference and final runs are bounded by progress (tests/bounded.sh), not by a fixed time.
source "$(dirname "${BASH_SOURCE[0]}")/bounded.sh"
run_bounded 300 1500 "$WORK/reference.log" - "$BIN" train -c "$CFG" "${ARGS[@]}" \
  runtime.run_dir="$REF" || fail "reference run failed (rc $?), see $WORK/reference.log"
echo "reference run: $((SECONDS - t0)) s"

has_checkpoint() { compgen -G "$RUN/checkpoints/step-*.ckpt" >/dev/null; }
completed() {
  [[ -f "$RUN/summary.json" ]] &&
    python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["status"] != "completed")' \
      "$RUN/summary.json"
}
# The command that continues the killed run: --resume once a checkpoint exists, else a fresh
# start (a kill before the first checkpoint leaves nothing to resume from).
start_cmd() {
  if has_checkpoint; then
    CMD=("$BIN" train --resume "$RUN")
    HOW="resume from $(cd "$RUN/checkpoints" && ls step-*.ckpt | tail -1)"
  else
    CMD=("$BIN" train -c "$CFG" "${ARGS[@]}" runtime.run_dir="$RUN")
    HOW="fresh start (no checkpoint yet)"
  fi
}

steps_logged() {
  if [[ -f "$RUN/metrics.jsonl" ]]; then grep -c . "$RUN/metrics.jsonl" || true; else echo 0; fi
}
sleep_ms() { sleep "$(printf '%d.%03d' $(($1 / 1000)) $(($1 % 1000)))"; }

# When a kill lands: one in four 0.3-1.5 s after the start (startup, loading, the first steps),
# the others 0-1 s after the restarted run logs its first new step, so that on a loaded machine,
# where startup alone can outlast a fixed delay, most iterations still make progress and resume
# from a newer checkpoint. The wait for that step is bounded by progress: no new step in 120 s
# fails the test as a hang.
kills=0
for ((i = 1; i <= KILLS; i++)); do
  start_cmd
  early=$((RANDOM % 4 == 0))
  delay_ms=$((early ? 300 + RANDOM % 1201 : RANDOM % 1001))
  before=$(steps_logged)
  "${CMD[@]}" >"$WORK/iter-$i.log" 2>&1 &
  pid=$!
  if ((early)); then
    when="after ${delay_ms} ms"
  else
    for ((t = 0; t < 2400; t++)); do
      (($(steps_logged) > before)) || ! kill -0 "$pid" 2>/dev/null && break
      sleep 0.05
    done
    (($(steps_logged) > before)) || ! kill -0 "$pid" 2>/dev/null ||
      fail "iter $i: no new step within 120 s of the restart ($HOW), see $WORK/iter-$i.log"
    when="${delay_ms} ms after step $(steps_logged)"
  fi
  sleep_ms "$delay_ms"
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null || true
    rc=0
    wait "$pid" 2>/dev/null || rc=$?
    pid=""
    kills=$((kills + 1))
    newest=$(has_checkpoint && (cd "$RUN/checkpoints" && ls step-*.ckpt | tail -1) || echo none)
    echo "iter $i: $HOW; killed -9 $when (rc $rc); newest checkpoint now $newest"
  else
    rc=0
    wait "$pid" || rc=$?
    pid=""
    if completed; then
      echo "iter $i: $HOW; completed before the kill at ${delay_ms} ms"
      break
    fi
    echo "iter $i: $HOW; exited by itself with rc $rc before the kill:"
    tail -5 "$WORK/iter-$i.log"
    fail "an interrupted run's restart failed"
  fi
done

if ! completed; then
  start_cmd
  run_bounded 300 1500 "$WORK/final.log" - "${CMD[@]}" || fail "final run failed (rc $?), see $WORK/final.log"
  echo "final: $HOW; completed"
fi

python3 - "$REF" "$RUN" "$STEPS" "$kills" <<'PY'
import json, sys
ref, run, steps, kills = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
a = json.load(open(ref + "/summary.json"))
b = json.load(open(run + "/summary.json"))
bad = []
if b["status"] != "completed": bad.append("status " + b["status"])
if a.get("params_sha256") != b.get("params_sha256"):
    bad.append("params_sha256 differs: reference %s, killed %s" % (a.get("params_sha256"), b.get("params_sha256")))
led = json.load(open(run + "/ledger.json"))
seen = {}
for k in ("trained", "dropped", "in_flight"):
    for q in led[k]:
        seen[q] = seen.get(q, 0) + 1
lost = [q for q in range(led["next_seq"]) if q not in seen]
dup = [q for q, n in seen.items() if n > 1]
if lost: bad.append("ledger: %d positions lost, e.g. %s" % (len(lost), lost[:10]))
if dup: bad.append("ledger: %d positions duplicated, e.g. %s" % (len(dup), dup[:10]))
st = [json.loads(l)["step"] for l in open(run + "/metrics.jsonl") if l.strip()]
if st != list(range(1, steps + 1)):
    bad.append("metrics.jsonl steps are not 1..%d once each (%d lines)" % (steps, len(st)))
print("kill9_loop: %d kills; params_sha256 %s %s; ledger next_seq %d, lost %d, duplicated %d; metrics %d lines; resumed_from_step %d; groups filtered %d"
      % (kills, b.get("params_sha256", "")[:16], "==" if a.get("params_sha256") == b.get("params_sha256") else "!=",
         led["next_seq"], len(lost), len(dup), len(st), b["resumed_from_step"], b.get("groups_filtered", 0)))
for m in bad: print("FAIL: " + m)
sys.exit(1 if bad else 0)
PY
echo "kill9_loop: passed in $((SECONDS - t0)) s"

#!/usr/bin/env bash
# The console (asyncrl repl) against real runs on loopback: ctest label `repl`.
#   repl_test.sh ASYNCRL WORK_DIR CASE [MODE]
# Cases:
#   session MODE  a scripted session (--json, piped and --exec) against a local run: status, set
#                 (a live key, a refused key), pause/resume (training drains, the watchdog is
#                 quiet), checkpoint, eval, generate, workers, kill a rollouter (it restarts),
#                 hang reward, delay-sync, stop. Asserts on the JSON answers and on the run's
#                 files: events.jsonl, the checkpoint, metrics.jsonl (the lr changes at the
#                 announced step), summary.json and ledger.json (the accounting identity).
#   remote        the same console on a run whose rollouters are in an `asyncrl worker`
#                 process: add-rollouter (local), remove-rollouter (remote), kill, set, stop.
#   staleness     fully_async: `set max_staleness 1` holds from the announced step on
#                 (staleness_max in metrics.jsonl), and the run trained staler groups before.
#   config        `asyncrl repl --config FILE --exec "...; stop"` starts a run, steers it, stops it.
#   security      TLS: refused without a certificate, attached with one; --read-only refuses
#                 every command that changes the run.
#   tty           the interactive console under tmux: tab completion, history recall (also
#                 after a restart, from ~/.asyncrl_history), help.
#   owner         without TLS only the run's owner steers it: run.secret is mode 600; a console
#                 without the secret, with a wrong one, and a worker without it are refused and
#                 logged; so is a second Unix user (made by the test, removed after; as root
#                 only), who cannot read the secret either. The owner then stops the run.
# Every process it starts is killed on exit; every wait is bounded.
set -euo pipefail

BIN=$(readlink -f "${1:?asyncrl binary}")
WORK=${2:?work dir}
CASE=${3:?case}
MODE=${4:-periodic}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CFG=$ROOT/configs/chaos/base.yaml
# The tiny chaos run, long enough to be steered (it ends with the console's stop); a stall fails
# it in 30 s.
COMMON=(trainer.total_steps=100000 checkpoint.every_steps=0 runtime.progress_timeout_s=30
        runtime.log_level=info cluster.request_timeout_ms=5000)
TMUX_SOCK="asyncrl_repl_test_$$"
TRAIN_TIMEOUT=300
FAIL_FILES=('*.jsonl' 'run/events.jsonl')
OTHER_USER=""
OTHER_DIR=""
extra_cleanup() {
  tmux -L "$TMUX_SOCK" kill-server 2>/dev/null || true
  if [[ -n "$OTHER_USER" ]]; then
    pkill -9 -u "$OTHER_USER" 2>/dev/null || true
    userdel "$OTHER_USER" 2>/dev/null || true
  fi
  [[ -z "$OTHER_DIR" ]] || rm -rf "$OTHER_DIR"
}
source "$ROOT/tests/multiprocess_lib.sh"

# repl ARGS...: the console, bounded.
repl() { timeout 120 "$BIN" repl "$@"; }

# jq-like checks on the session's JSON lines: check FILE 'python expression over r' MESSAGE,
# where r is the list of answers in order.
check() {
  python3 - "$1" "$2" "$3" <<'PY' || fail "$3"
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
ok = eval(sys.argv[2], {"r": r, "json": json})
if not ok:
    print("check failed:", sys.argv[3]); [print(" ", x) for x in r]; sys.exit(1)
PY
}

# The answer to the command that starts with PREFIX, from a JSON session file.
answer() {
  python3 - "$1" "$2" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    x = json.loads(l)
    if x["command"].startswith(sys.argv[2]):
        print(json.dumps(x)); break
PY
}

# wait_drained RUN_DIR: paused, the step count stops moving and nothing is generating or queued.
wait_drained() {
  local last=-1
  for _ in $(seq 60); do
    repl --attach "$1" --json --exec status >"$WORK/drain.jsonl" || true
    local now
    now=$(python3 -c 'import json,sys; r=json.loads(open(sys.argv[1]).read()); q=r["result"]["queue"]; print(r["result"]["run"]["step"] if q["running"]==0 and q["depth"]==0 else -2)' "$WORK/drain.jsonl")
    [[ $now -ge 0 && $now -eq $last ]] && { DRAINED_AT=$now; return; }
    last=$now
    sleep 0.5
  done
  fail "the paused run did not drain in 30 s"
}

# Events of the run, by name, checked against events.jsonl.
check_events() {
  python3 - "$1/events.jsonl" "${@:2}" <<'PY' || fail "events.jsonl"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
names = [e["event"] for e in ev]
for want in sys.argv[2:]:
    if want not in names:
        print("missing event", want, "in", names); sys.exit(1)
for e in ev:
    for k in ("time", "wall_time_s", "step", "event"):
        if k not in e: print("event without", k, e); sys.exit(1)
print("ok: events", names)
PY
}

# lr_from RUN_DIR STEP OLD NEW: metrics.jsonl has lr OLD before STEP and NEW from STEP on.
lr_from() {
  python3 - "$@" <<'PY' || fail "the lr did not change at the announced step"
import json, sys
run, step, old, new = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
m = [json.loads(l) for l in open(run + "/metrics.jsonl")]
before = [x["lr"] for x in m if x["step"] < step]
after = [x["lr"] for x in m if x["step"] >= step]
assert before and after, (len(before), len(after))
assert all(abs(x - old) < 1e-12 for x in before), ("before", step, before[-5:])
assert all(abs(x - new) < 1e-12 for x in after), ("after", step, after[:5])
print("ok: lr", old, "for steps <", step, "and", new, "from step", step, "on")
PY
}

# stopped_at_checkpoint RUN_DIR: the console's stop ended the training at its checkpoint (a step
# trained after it would be counted by summary.json and metrics.jsonl, held by no checkpoint,
# and trained again by the resume), and a stop is not a failure: ok, no error, exit code 0.
stopped_at_checkpoint() {
  python3 - "$1" <<'PY' || fail "the stop's summary"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
last = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")][-1]["step"]
assert s["status"] == "stopped" and s["ok"] and s["error"] == "", (s["status"], s["ok"], s["error"])
assert s["steps"] == s["checkpoint_step"] == last, (s["steps"], s["checkpoint_step"], last)
assert s["checkpoint"].endswith("step-%08d.ckpt" % s["steps"]), s["checkpoint"]
print("ok: stopped at step", s["steps"], "with its checkpoint", s["checkpoint"])
PY
}

case "$CASE" in
  session)
    start_train run async_training.mode="$MODE" reward.timeout_ms=200
    port_of "$WORK/run" >/dev/null
    wait_steps "$WORK/run" 3
    # Piped stdin: one command per line, one JSON answer per command; the refused set makes the
    # exit code 1.
    rc=0
    printf '%s\n' status "metrics 2" "set trainer.lr 0.005" "set rollout.n 4" "set no.such 1" \
      "get lr" "frobnicate" pause | repl --attach "$WORK/run" --json >"$WORK/s1.jsonl" || rc=$?
    [[ $rc -eq 1 ]] || fail "a session with refused commands exited $rc, not 1"
    check "$WORK/s1.jsonl" 'len(r) == 8' "one answer per command"
    check "$WORK/s1.jsonl" 'r[0]["ok"] and r[0]["result"]["accounting"]["holds"] and r[0]["result"]["run"]["mode"] == "'"$MODE"'"' "status"
    check "$WORK/s1.jsonl" 'len(r[0]["result"]["rollouters"]) == 2 and all(x["where"] == "local" for x in r[0]["result"]["rollouters"])' "status lists both rollouters"
    check "$WORK/s1.jsonl" 'r[1]["ok"] and len(r[1]["result"]["steps"]) == 2 and r[1]["result"]["steps"][1]["step"] == r[1]["result"]["steps"][0]["step"] + 1' "metrics 2"
    check "$WORK/s1.jsonl" 'r[2]["ok"] and r[2]["result"]["key"] == "trainer.lr" and r[2]["result"]["effective_step"] > r[0]["result"]["run"]["step"]' "set trainer.lr"
    check "$WORK/s1.jsonl" '(not r[3]["ok"]) and "group size" in r[3]["error"]' "rollout.n is refused with its reason"
    check "$WORK/s1.jsonl" '(not r[4]["ok"]) and "unknown config key" in r[4]["error"]' "an unknown key is refused"
    check "$WORK/s1.jsonl" 'r[5]["ok"] and float(r[5]["result"]["value"]) == 0.005 and r[5]["result"]["live"]' "get shows the new value"
    check "$WORK/s1.jsonl" '(not r[6]["ok"]) and "unknown command" in r[6]["error"]' "an unknown command"
    check "$WORK/s1.jsonl" 'r[7]["ok"] and r[7]["result"]["paused"]' "pause"
    LR_STEP=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][2]["result"]["effective_step"])' "$WORK/s1.jsonl")
    # Paused: training drains and then stands still (no watchdog failure), admission is held.
    wait_drained "$WORK/run"
    repl --attach "$WORK/run" --json --exec "status; resume" >"$WORK/s2.jsonl"
    check "$WORK/s2.jsonl" 'r[0]["result"]["run"]["state"] == "paused" and r[0]["result"]["queue"]["held"] and r[0]["result"]["accounting"]["holds"]' "paused status"
    # Drained, every prompt in flight is where status says: none at an idle rollouter, the rest
    # scored, queued or with the trainer (an open step waits for resume).
    check "$WORK/s2.jsonl" 'all(x["prompts_in_flight"] == 0 for x in r[0]["result"]["rollouters"] if x["state"] == "idle") and (lambda f: f["prompts"] == f["generating"] + f["scoring_groups"] + f["queued_groups"] + f["trainer_groups"])(r[0]["result"]["in_flight"])' "paused: where the prompts in flight are"
    check "$WORK/s2.jsonl" 'r[1]["ok"] and not r[1]["result"]["paused"]' "resume"
    wait_steps "$WORK/run" $((DRAINED_AT + 3))
    [[ $DRAINED_AT -ge $LR_STEP ]] || wait_steps "$WORK/run" $((LR_STEP + 1))
    repl --attach "$WORK/run" --json --exec "checkpoint; eval 4; generate 12+7=; workers; kill rollouter 0; hang reward; delay-sync 300; watch 2" >"$WORK/s3.jsonl"
    check "$WORK/s3.jsonl" 'all(x["ok"] for x in r)' "every command of the third session succeeded"
    check "$WORK/s3.jsonl" '__import__("os").path.exists(r[0]["result"]["path"])' "the checkpoint file exists"
    check "$WORK/s3.jsonl" '0 <= r[1]["result"]["accuracy"] <= 1 and r[1]["result"]["questions"] == 4' "eval 4"
    check "$WORK/s3.jsonl" 'isinstance(r[2]["result"]["response"], str) and r[2]["result"]["tokens"] >= 1' "generate"
    check "$WORK/s3.jsonl" 'len(r[3]["result"]["reward_workers"]) == 2' "workers lists the reward workers"
    check "$WORK/s3.jsonl" 'r[4]["result"]["id"] == 0' "kill rollouter 0"
    check "$WORK/s3.jsonl" 'sum(1 for x in r if x["command"] == "watch 2") >= 2' "watch prints a status per second"
    # The killed rollouter restarts (the supervisor) and works again.
    for _ in $(seq 100); do grep -q "restarting rollouter 0" "$WORK/run.log" && break; sleep 0.1; done
    grep -q "restarting rollouter 0" "$WORK/run.log" || fail "rollouter 0 was not restarted"
    n=$(steps_of "$WORK/run")
    wait_steps "$WORK/run" $((n + 3))
    # A second console, attached before the stop with its commands on a pipe: after the stop
    # its next command must say at once that the run has ended, not wait out a request timeout.
    mkfifo "$WORK/s5.in"
    repl --attach "$WORK/run" --json <"$WORK/s5.in" >"$WORK/s5.jsonl" 2>"$WORK/s5.err" &
    s5=$!
    pids+=("$s5")
    exec 7>"$WORK/s5.in"
    echo status >&7
    for _ in $(seq 300); do [[ -s "$WORK/s5.jsonl" ]] && break; sleep 0.1; done
    repl --attach "$WORK/run" --json --exec "workers; stop; status" >"$WORK/s4.jsonl" 2>"$WORK/s4.err"
    check "$WORK/s4.jsonl" 'any(x["id"] == 0 and x["state"] != "starting" for x in r[0]["result"]["rollouters"])' "rollouter 0 is back"
    check "$WORK/s4.jsonl" 'r[1]["ok"] and r[1]["result"]["stopping"] and r[1]["result"]["checkpoint"]' "stop"
    # The console detaches after the stop: the command after it is not sent, and it says so.
    check "$WORK/s4.jsonl" 'len(r) == 2' "no command runs after stop"
    grep -q "1 command(s) after .stop. not run" "$WORK/s4.err" || fail "the skipped command was not reported"
    wait_train
    echo status >&7
    exec 7>&-
    wait "$s5" || true
    # "the run has ended" comes from the controller's down message, seen before the request is
    # sent; a console without it would answer "no answer from the run" after its timeout.
    check "$WORK/s5.jsonl" 'r[0]["ok"] and not r[1]["ok"] and "the run has ended" in r[1]["error"]' "a command after the run ended"
    grep -q "^stopped: stopped from the console" "$WORK/run.log" || fail "train did not report the stop"
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status stopped --restarts 1 || fail "accounting"
    stopped_at_checkpoint "$WORK/run"
    python3 - "$WORK/run" <<'PY' || fail "summary after the console's session"
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["checkpoints_written"] >= 2, s["checkpoints_written"]  # the console's and the stop's
assert s["reward"]["timeouts"] >= 1, s["reward"]  # hang reward: the call timed out, scored 0
print("ok: checkpoints", s["checkpoints_written"], "reward timeouts", s["reward"]["timeouts"])
PY
    check_events "$WORK/run" set pause resume checkpoint kill hang delay-sync stop
    lr_from "$WORK/run" "$LR_STEP" 0.01 0.005
    ;;
  remote)
    start_train run rollout.num_workers=0
    port=$(port_of "$WORK/run")
    timeout 300 "$BIN" worker --connect "127.0.0.1:$port" --secret-file "$WORK/run/run.secret" \
      --rollouters 2 >"$WORK/worker.log" 2>&1 &
    WORKER=$!
    pids+=("$WORKER")
    wait_steps "$WORK/run" 3
    repl --attach "127.0.0.1:$port" --secret-file "$WORK/run/run.secret" --json \
      --exec "status; add-rollouter; set rollout.temperature 0.7" >"$WORK/r1.jsonl"
    check "$WORK/r1.jsonl" 'all(x["ok"] for x in r)' "first remote session"
    check "$WORK/r1.jsonl" 'sorted(x["id"] for x in r[0]["result"]["rollouters"]) == [0, 1] and all("pid" in x["where"] for x in r[0]["result"]["rollouters"])' "the worker's two rollouters are listed as remote"
    check "$WORK/r1.jsonl" 'r[1]["result"]["id"] == 2' "add-rollouter gets the next id"
    n=$(steps_of "$WORK/run")
    wait_steps "$WORK/run" $((n + 3))
    repl --attach "$WORK/run" --json --exec "remove-rollouter 0; kill rollouter 2; workers" >"$WORK/r2.jsonl"
    check "$WORK/r2.jsonl" 'all(x["ok"] for x in r)' "second remote session"
    check "$WORK/r2.jsonl" '"pid" in r[0]["result"]["where"]' "removed a remote rollouter"
    check "$WORK/r2.jsonl" 'sorted(x["id"] for x in r[2]["result"]["rollouters"]) == [1, 2]' "rollouters 1 (remote) and 2 (local) remain"
    for _ in $(seq 100); do grep -q "restarting rollouter 2" "$WORK/run.log" && break; sleep 0.1; done
    grep -q "restarting rollouter 2" "$WORK/run.log" || fail "the added rollouter was not restarted"
    n=$(steps_of "$WORK/run")
    wait_steps "$WORK/run" $((n + 3))
    repl --attach "$WORK/run" --json --exec "workers; stop" >"$WORK/r3.jsonl"
    check "$WORK/r3.jsonl" 'r[0]["ok"] and any(x["id"] == 2 and x["groups_completed"] > 0 for x in r[0]["result"]["rollouters"])' "the restarted local rollouter works"
    wait_train
    rc=0; wait "$WORKER" || rc=$?
    [[ $rc -eq 0 ]] || fail "the worker exited with $rc after the stop"
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status stopped --joined 2 --restarts 1 || fail "accounting"
    stopped_at_checkpoint "$WORK/run"
    check_events "$WORK/run" add-rollouter set remove-rollouter kill stop
    ;;
  staleness)
    # fully_async with partial rollout, eta 4 at first: groups up to 4 versions old are trained.
    CFG=$ROOT/configs/chaos/fully_async.yaml
    start_train run async_training.max_staleness=4 async_training.staleness_threshold=2
    port_of "$WORK/run" >/dev/null
    wait_steps "$WORK/run" 30
    repl --attach "$WORK/run" --json --exec "set max_staleness 1" >"$WORK/t1.jsonl"
    check "$WORK/t1.jsonl" 'r[0]["ok"] and r[0]["result"]["key"] == "async_training.max_staleness"' "set max_staleness"
    S=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read())["result"]["effective_step"])' "$WORK/t1.jsonl")
    wait_steps "$WORK/run" $((S + 30))
    repl --attach "$WORK/run" --json --exec stop >/dev/null
    wait_train
    python3 - "$WORK/run" "$S" <<'PY' || fail "the new staleness bound"
import json, sys
run, s = sys.argv[1], int(sys.argv[2])
m = [json.loads(l) for l in open(run + "/metrics.jsonl")]
before = [x["staleness_max"] for x in m if x["step"] < s]
after = [x["staleness_max"] for x in m if x["step"] >= s]
assert len(after) >= 30, len(after)
# The bound holds from the announced step, not later...
assert max(after) <= 1, ("staleness over the new bound at or after step", s, after)
# ...and it is a change: before it, staler groups were trained (else this proves nothing).
assert max(before) > 1, ("nothing staler than 1 before step", s, before)
print("ok: staleness_max up to", max(before), "before step", s, "and at most", max(after), "from it on")
PY
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status stopped || fail "accounting"
    stopped_at_checkpoint "$WORK/run"
    ;;
  config)
    # The console starts the run itself and detaches; a second console stops it. The run's log
    # is in its run_dir, and the live checkpoint.every_steps shows as checkpoint files.
    sed -e "s|run_dir: runs/chaos|run_dir: $WORK/run|" -e "s|total_steps: 24|total_steps: 100000|" \
      -e "s|every_steps: 4|every_steps: 0|" "$CFG" >"$WORK/config.yaml"
    grep -q "base:" "$WORK/config.yaml" && fail "unexpected base: in $CFG"
    rc=0
    timeout 120 "$BIN" repl --config "$WORK/config.yaml" --json \
      --exec "status; set checkpoint.every_steps 5" >"$WORK/c1.jsonl" 2>"$WORK/c1.log" || rc=$?
    RUNPID=$(grep -o 'started the run (pid [0-9]*' "$WORK/c1.log" | grep -o '[0-9]*$' || true)
    [[ -n "$RUNPID" ]] || fail "repl --config did not start a run"
    pids+=("$RUNPID")
    [[ $rc -eq 0 ]] || fail "repl --config exited $rc"
    check "$WORK/c1.jsonl" 'all(x["ok"] for x in r) and len(r) == 2' "the --config session"
    S=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][1]["result"]["effective_step"])' "$WORK/c1.jsonl")
    # The first multiple of 5 at or after the announced step gets a checkpoint.
    C=$(( (S + 4) / 5 * 5 ))
    wait_steps "$WORK/run" $((C + 1))
    for _ in $(seq 100); do ls "$WORK"/run/checkpoints/step-*"$C".ckpt >/dev/null 2>&1 && break; sleep 0.1; done
    ls "$WORK"/run/checkpoints/step-*"$C".ckpt >/dev/null 2>&1 ||
      fail "no checkpoint of step $C after the live checkpoint.every_steps 5 (announced for step $S)"
    repl --attach "$WORK/run" --exec stop >/dev/null
    # The run is not our child (it has its own session): its last line in its log says it ended.
    for _ in $(seq 300); do grep -q "^resume with" "$WORK/run/train.log" && break; sleep 0.1; done
    grep -q "^stopped: stopped from the console" "$WORK/run/train.log" ||
      fail "the run did not stop within 30 s (or its log is not in its run_dir)"
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status stopped || fail "accounting"
    stopped_at_checkpoint "$WORK/run"
    ;;
  security)
    bash "$ROOT/scripts/make-certs.sh" "$WORK/ca-a" >/dev/null
    bash "$ROOT/scripts/make-certs.sh" "$WORK/ca-b" >/dev/null
    A=$WORK/ca-a
    start_train run cluster.tls.certificate="$A/node.pem" cluster.tls.key="$A/node.key" \
      cluster.tls.ca="$A/ca.pem"
    port=$(port_of "$WORK/run")
    wait_steps "$WORK/run" 2
    rc=0; repl --attach "$WORK/run" --exec status >"$WORK/plain.out" 2>"$WORK/plain.log" || rc=$?
    [[ $rc -ne 0 ]] && grep -q "uses TLS" "$WORK/plain.log" || fail "a console without a certificate attached"
    rc=0; repl --attach "127.0.0.1:$port" --tls-dir "$WORK/ca-b" --exec status >/dev/null 2>"$WORK/wrongca.log" || rc=$?
    [[ $rc -ne 0 ]] || fail "a console with another CA's certificate attached"
    repl --attach "$WORK/run" --tls-dir "$A" --json --read-only \
      --exec "status; set trainer.lr 0.5; pause; stop; get trainer.lr" >"$WORK/ro.jsonl" || true
    check "$WORK/ro.jsonl" 'r[0]["ok"] and r[4]["ok"] and r[4]["result"]["value"] == "0.01"' "read-only may look"
    check "$WORK/ro.jsonl" 'all((not x["ok"]) and "read-only" in x["error"] for x in r[1:4])' "read-only refuses changes"
    repl --attach "$WORK/run" --tls-dir "$A" --json --exec "stop" >"$WORK/stop.jsonl"
    wait_train
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status stopped || fail "accounting"
    stopped_at_checkpoint "$WORK/run"
    [[ ! -f "$WORK/run/events.jsonl" ]] || ! grep -q '"set"\|"pause"' "$WORK/run/events.jsonl" ||
      fail "a read-only console changed the run"
    ;;
  owner)
    unset ASYNCRL_RUN_SECRET
    start_train run
    port=$(port_of "$WORK/run")
    wait_steps "$WORK/run" 2
    [[ $(stat -c %a "$WORK/run/run.secret") == 600 ]] || fail "run.secret is not mode 600"
    repl --attach "127.0.0.1:$port" --json --exec "status; stop" >"$WORK/nosecret.jsonl" || true
    check "$WORK/nosecret.jsonl" 'len(r) == 2 and all(not x["ok"] and "secret" in x["error"] for x in r)' "a console without the secret was not refused"
    ASYNCRL_RUN_SECRET=00112233 repl --attach "127.0.0.1:$port" --json --exec "stop" >"$WORK/wrong.jsonl" || true
    check "$WORK/wrong.jsonl" 'len(r) == 1 and not r[0]["ok"] and "wrong" in r[0]["error"]' "a console with a wrong secret was not refused"
    rc=0; timeout 60 "$BIN" worker --connect "127.0.0.1:$port" >"$WORK/nosecret-worker.log" 2>&1 || rc=$?
    [[ $rc -ne 0 && $rc -ne 124 ]] || fail "a worker without the secret was not refused (rc $rc)"
    refusals=3
    if [[ $(id -u) -eq 0 ]] && command -v useradd >/dev/null && command -v runuser >/dev/null; then
      OTHER_USER="asyncrl-t$$"
      useradd --no-create-home --shell /usr/sbin/nologin "$OTHER_USER" || fail "useradd failed"
      # A copy of the binary the other user can run (the build tree may be private).
      OTHER_DIR=$(mktemp -d /tmp/asyncrl-owner-XXXXXX)
      chmod 755 "$OTHER_DIR"
      cp "$BIN" "$OTHER_DIR/asyncrl" && chmod 755 "$OTHER_DIR/asyncrl"
      rc=0; runuser -u "$OTHER_USER" -- cat "$WORK/run/run.secret" >/dev/null 2>&1 || rc=$?
      [[ $rc -ne 0 ]] || fail "another user can read run.secret"
      rc=0; runuser -u "$OTHER_USER" -- timeout 120 "$OTHER_DIR/asyncrl" repl --attach "127.0.0.1:$port" \
        --json --exec "set trainer.lr 0.5; stop" >"$WORK/other.jsonl" 2>"$WORK/other.log" || rc=$?
      check "$WORK/other.jsonl" 'len(r) == 2 and all(not x["ok"] and "secret" in x["error"] for x in r)' "another user's console was not refused"
      refusals=5
      echo "ok: user $OTHER_USER cannot read run.secret, and its console was refused"
    else
      echo "note: not root (or no useradd/runuser): the second-user part is skipped"
    fi
    n=$(grep -c "cluster: refused a " "$WORK/run.log" || true)
    [[ $n -ge $refusals ]] || fail "the run logged $n refusals, expected $refusals"
    repl --attach "$WORK/run" --json --exec "status; get trainer.lr; stop" >"$WORK/owner.jsonl"
    check "$WORK/owner.jsonl" 'all(x["ok"] for x in r) and r[1]["result"]["value"] == "0.01"' "the owner (with run.secret) steers the run, unchanged by the others"
    wait_train
    python3 "$ROOT/tests/check_run.py" "$WORK/run" --status stopped || fail "accounting"
    stopped_at_checkpoint "$WORK/run"
    echo "ok: $n refusals logged; only the owner stopped the run"
    ;;
  tty)
    command -v tmux >/dev/null || fail "tmux is not installed (scripts/setup.sh installs it)"
    start_train run
    port_of "$WORK/run" >/dev/null
    wait_steps "$WORK/run" 2
    mkdir -p "$WORK/home"
    t() { tmux -L "$TMUX_SOCK" "$@"; }
    # A session that outlives the consoles' sessions: killing the last session makes the tmux
    # server exit, and a client racing with that exit fails with "server exited unexpectedly"
    # (seen once in CI). extra_cleanup kills the server and this session with it.
    t new-session -d -s hold "sleep 600" || fail "tmux could not start a server"
    pane() { t capture-pane -p -t repl -S -200 2>/dev/null || true; }
    # wait_for TEXT [COUNT]: until the pane shows TEXT at least COUNT times (bounded: 20 s).
    wait_for() {
      for _ in $(seq 200); do
        [[ $(pane | grep -cF -- "$1") -ge ${2:-1} ]] && return
        sleep 0.1
      done
      pane >"$WORK/pane.log"
      fail "the console did not show '$1' (x${2:-1}); pane in pane.log"
    }
    open_console() {
      t new-session -d -s repl -x 160 -y 50 \
        "env -u ASYNCRL_HISTORY HOME=$WORK/home timeout --foreground 120 $BIN repl --attach $WORK/run; sleep 30" ||
        fail "tmux new-session failed"
      wait_for "asyncrl>"
    }
    open_console
    t send-keys -t repl 'sta' Tab
    wait_for "asyncrl> status"                 # completion of a command
    t send-keys -t repl Enter
    wait_for "accounting: dispatched"
    t send-keys -t repl 'help se' Tab Enter
    wait_for "usage: set KEY VALUE"            # completion, then help for one command
    t send-keys -t repl 'get max_st' Tab Enter
    wait_for "async_training.max_staleness = " # completion of a config key alias
    t send-keys -t repl Up Up Enter            # history: `help set` again
    wait_for "usage: set KEY VALUE" 2
    t send-keys -t repl 'quit' Enter
    wait_for "asyncrl> quit"
    for _ in $(seq 100); do grep -q "quit" "$WORK/home/.asyncrl_history" 2>/dev/null && break; sleep 0.1; done
    grep -qx "status" "$WORK/home/.asyncrl_history" || fail "history file lacks 'status'"
    t kill-session -t repl || fail "tmux kill-session failed"
    # A new console recalls the last session's commands.
    open_console
    t send-keys -t repl Up Up Enter            # history: quit, then `help set` (run twice before)
    wait_for "usage: set KEY VALUE"
    t send-keys -t repl 'quit' Enter
    t kill-session -t repl 2>/dev/null || true
    repl --attach "$WORK/run" --exec stop >/dev/null
    wait_train
    ;;
  *)
    echo "unknown case $CASE"; exit 2 ;;
esac
echo "ok: repl $CASE"

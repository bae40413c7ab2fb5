# Shared by the multi-process tests (tests/cluster/cluster_test.sh, tests/repl/repl_test.sh);
# sourced after they set BIN (the asyncrl binary), WORK (a fresh directory), CFG (a config file)
# and COMMON (key=value overrides for every train). Every process started through it is killed
# on exit, and every wait is bounded.
#   FAIL_FILES   extra files fail() prints, besides $WORK/*.log: patterns relative to $WORK
#   extra_cleanup  a function run first on exit, when the caller defines it

pids=()
cleanup() {
  if declare -F extra_cleanup >/dev/null; then extra_cleanup; fi
  # Each pid is a `timeout` wrapper: its asyncrl child first, then the wrapper.
  for p in "${pids[@]}"; do pkill -9 -P "$p" 2>/dev/null || true; kill -9 "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() {
  echo "FAIL: $*"
  local pat f
  for pat in '*.log' ${FAIL_FILES[@]+"${FAIL_FILES[@]}"}; do
    for f in "$WORK"/$pat; do
      [[ -f "$f" ]] && { echo "--- $f"; tail -20 "$f"; }
    done
  done
  exit 1
}

rm -rf "$WORK"
mkdir -p "$WORK"

# start_train NAME ARGS...: `asyncrl train` in the background (bounded), run_dir $WORK/NAME,
# output in $WORK/NAME.{out,log}; sets TRAIN_PID.
start_train() {
  local name=$1
  shift
  timeout "${TRAIN_TIMEOUT:-240}" "$BIN" train -c "$CFG" "${COMMON[@]}" \
    runtime.run_dir="$WORK/$name" "$@" >"$WORK/$name.out" 2>"$WORK/$name.log" &
  TRAIN_PID=$!
  pids+=("$TRAIN_PID")
}

# port_of RUN_DIR: waits (bounded) for cluster.json and prints the port.
port_of() {
  for _ in $(seq 300); do
    if [[ -f "$1/cluster.json" ]]; then
      python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$1/cluster.json"
      return
    fi
    kill -0 "$TRAIN_PID" 2>/dev/null || fail "train exited before listening"
    sleep 0.1
  done
  fail "no $1/cluster.json after 30 s"
}

# secret_args PORT: --secret-file of the run under $WORK listening on PORT, when it has one (a
# run without TLS); nothing otherwise.
secret_args() {
  local f
  for f in "$WORK"/*/cluster.json; do
    [[ -f "$f" ]] || continue
    if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["port"] != int(sys.argv[2]))' \
        "$f" "$1" && [[ -f "$(dirname "$f")/run.secret" ]]; then
      echo "--secret-file $(dirname "$f")/run.secret"
      return
    fi
  done
}

# start_worker NAME PORT ARGS...: an `asyncrl worker` in the background, with the run's secret;
# sets WORKER_PID.
start_worker() {
  local name=$1 port=$2
  shift 2
  # shellcheck disable=SC2046  # the two words of secret_args, or none
  timeout "${TRAIN_TIMEOUT:-240}" "$BIN" worker --connect "127.0.0.1:$port" $(secret_args "$port") "$@" \
    >"$WORK/$name.log" 2>&1 &
  WORKER_PID=$!
  pids+=("$WORKER_PID")
}

steps_of() { [[ -f "$1/metrics.jsonl" ]] && wc -l <"$1/metrics.jsonl" || echo 0; }

# wait_steps RUN_DIR N: until metrics.jsonl has N steps (bounded: 60 s).
wait_steps() {
  for _ in $(seq 600); do
    [[ $(steps_of "$1") -ge $2 ]] && return
    sleep 0.1
  done
  fail "no $2 steps in 60 s"
}

wait_train() {
  local rc=0
  wait "$TRAIN_PID" || rc=$?
  [[ $rc -eq 0 ]] || fail "train exited with $rc"
}

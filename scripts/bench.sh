#!/usr/bin/env bash
# The benchmark suite: installs what is missing, builds the benchmarks (Release), warm-starts the
# demo model if there is none, runs every benchmark (each writes bench/results/<name>.json),
# the end-to-end comparison of every mode and the time-to-accuracy comparison, and writes
# bench/results/summary.md and PNG plots.
#   scripts/bench.sh [--quick]      (--quick: a reduced suite, under 10 minutes on 2 cores)
# Benchmarks run one after another: each one has the machine to itself.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
QUICK=""
for a in "$@"; do
  case "$a" in
    --quick) QUICK="--quick" ;;
    *) echo "usage: scripts/bench.sh [--quick]" >&2; exit 2 ;;
  esac
done
"$ROOT/scripts/setup.sh" -DASYNCRL_BUILD_BENCH=ON
BUILD="${ASYNCRL_BUILD_DIR:-$ROOT/build}"
RES="$ROOT/bench/results"
mkdir -p "$RES"
cd "$ROOT"
start=$(date +%s)

step() { echo "== [$(( $(date +%s) - start ))s] $*" >&2; }

# The model every end-to-end run starts from: the demo's warm start (same config and seed).
MODEL="runs/demo/sft/final"
if [ ! -f "$MODEL/model.safetensors" ]; then
  step "warm-start: asyncrl sft -c configs/demo.yaml runtime.run_dir=runs/demo/sft"
  "$BUILD/asyncrl" sft -c configs/demo.yaml runtime.run_dir=runs/demo/sft >/dev/null
fi

bench() {  # bench NAME [args...]: build/bench/bench_NAME writes bench/results/NAME.json
  local name="$1"
  shift
  step "bench_$name $*"
  "$BUILD/bench/bench_$name" "$@" --out "$RES/$name.json" >/dev/null
}

# The simulator's costs first: the end-to-end validation uses them (calibration.json).
step "bench_calibrate"
"$BUILD/bench/bench_calibrate" --out "$RES/calibration.json" >/dev/null
if [ -n "$QUICK" ]; then
  bench shared_prompt --reps 3
  bench prox --reps 3
  bench generation --reps 2
else
  bench shared_prompt
  bench prox
  bench generation
  bench train
fi
bench queue $QUICK
bench actor_overhead $QUICK
bench weight_sync $QUICK
bench continuous_batching $QUICK
bench sim_scale $QUICK

step "e2e.py --model $MODEL $QUICK"
/usr/bin/python3 bench/e2e.py --model "$MODEL" --out "$RES" $QUICK >/dev/null

# Time to accuracy: every mode from one warm start, three RL seeds (about 40 minutes; --quick:
# one seed, three modes, 20 steps).
step "learning.py --warm $MODEL $QUICK"
/usr/bin/python3 bench/learning.py --warm "$MODEL" --out "$RES" --runs-dir runs/learning $QUICK >/dev/null

step "summarize"
/usr/bin/python3 bench/summarize.py --results "$RES"
step "done: $RES/summary.md"

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
if [ -n "$QUICK" ]; then
  step "bench_calibrate --reps 2"
  "$BUILD/bench/bench_calibrate" --reps 2 --out "$RES/calibration.json" >/dev/null
else
  step "bench_calibrate"
  "$BUILD/bench/bench_calibrate" --out "$RES/calibration.json" >/dev/null
fi
# --quick (budget, 2 cores: about 8 of its 10 minutes): calibrate ~1 min, contention ~1 min,
# weight_sync/queue/actor_overhead/sim_scale ~1 min, e2e ~3.5 min (22 runs x 12 steps),
# learning ~1.5 min (3 modes x 20 steps), packing ~20 s. It skips the component benchmarks that no
# target reads (prox, generation, train, continuous_batching): summary.md marks their results as
# older than this run.
if [ -n "$QUICK" ]; then
  bench shared_prompt --reps 2 --shapes "256,16,8;64,64,8"
else
  bench shared_prompt
  bench prox
  bench generation
  bench train
  bench continuous_batching
fi
bench queue $QUICK
bench actor_overhead $QUICK
bench weight_sync $QUICK
bench sim_scale $QUICK
# How much generation and training slow each other on shared cores. Its factors set the overlap
# bounds of e2e.py's targets, measured apart from the runs they judge; without it those bounds are
# reported as not measured (e2e.py refuses a contention.json from an earlier suite run).
if [ -x "$BUILD/bench/bench_contention" ]; then
  bench contention $QUICK
else
  step "bench_contention not built: the overlap bounds will be reported as not measured"
fi

# Every mode end to end; each run is also simulated (simulator_validation.json).
E2E_ARGS=()
[ -n "$QUICK" ] && E2E_ARGS=(--quick --no-a3po)
step "e2e.py --model $MODEL ${E2E_ARGS[*]}"
/usr/bin/python3 bench/e2e.py --model "$MODEL" --bin "$BUILD/asyncrl" --out "$RES" "${E2E_ARGS[@]}" >/dev/null

# Time to accuracy: every mode from one warm start, three RL seeds (about 40 minutes; --quick:
# one seed, colocated sync and the two fastest async modes, 20 steps, evaluated every 10).
if [ -n "$QUICK" ]; then
  step "learning.py --warm $MODEL --quick --modes sync,stream_off_policy,fully_async_partial"
  /usr/bin/python3 bench/learning.py --bin "$BUILD/asyncrl" --warm "$MODEL" --out "$RES" \
    --runs-dir runs/learning-quick --quick --modes sync,stream_off_policy,fully_async_partial >/dev/null
else
  step "learning.py --warm $MODEL"
  /usr/bin/python3 bench/learning.py --bin "$BUILD/asyncrl" --warm "$MODEL" --out "$RES" \
    --runs-dir runs/learning >/dev/null
fi

# summary.md, and the target table on stdout.
step "summarize"
/usr/bin/python3 bench/summarize.py --results "$RES"
took=$(( $(date +%s) - start ))
step "done: $RES/summary.md"
if [ -n "$QUICK" ] && [ "$took" -gt 600 ]; then
  echo "WARNING: --quick took ${took}s, over its 10-minute budget (600s) on this machine" >&2
fi

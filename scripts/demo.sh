#!/usr/bin/env bash
# The main job on the built-in default: installs what is missing, builds, warm-starts a small
# Qwen2-architecture model on the arithmetic task, RL-trains it with the fully asynchronous
# actor runtime, and shows eval accuracy before and after plus a reward-vs-time plot.
#   scripts/demo.sh [--config FILE] [key=value ...]
# (FILE defaults to configs/demo.yaml; the overrides apply to both runs. configs/tools_demo.yaml
# is the multi-turn tool demo, docs/episodes.md.)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CONFIG="configs/demo.yaml"
if [[ "${1:-}" == "--config" ]]; then
  CONFIG="${2:?--config needs a file}"
  shift 2
fi
ASYNCRL_TARGET=asyncrl_cli "$ROOT/scripts/setup.sh"
cd "$ROOT"
BIN="${ASYNCRL_BUILD_DIR:-$ROOT/build}/asyncrl"
OUT="$("$BIN" config -c "$CONFIG" --get runtime.run_dir "$@")"
SFT="$OUT/sft"
RL="$OUT/train"
start=$(date +%s)

echo "== 1/3 warm-start: asyncrl sft --config $CONFIG runtime.run_dir=$SFT $*"
"$BIN" sft --config "$CONFIG" "$@" runtime.run_dir="$SFT"

echo "== 2/3 RL: asyncrl train --config $CONFIG model.path=$SFT/final runtime.run_dir=$RL $*"
"$BIN" train --config "$CONFIG" "$@" model.path="$SFT/final" runtime.run_dir="$RL" >/dev/null

echo "== 3/3 results"
/usr/bin/python3 scripts/plot_metrics.py --out "$RL/reward.png" \
  --title "asyncrl demo: fully async RL with partial rollout" "fully_async=$RL/metrics.jsonl" >/dev/null
/usr/bin/python3 - "$RL/summary.json" "$RL/reward.png" "$start" <<'PY'
import json, sys, time
s = json.load(open(sys.argv[1]))
print(f"eval accuracy (greedy pass@1 on {sys.argv[1].rsplit('/', 1)[0]}/data/test.jsonl):")
print(f"  before RL (warm-start): {s['initial_eval_accuracy']:.4f}")
print(f"  after  RL ({s['steps']} steps): {s['final_eval_accuracy']:.4f}")
print(f"groups: generated {s['groups_generated']}, trained {s['groups_trained']}, "
      f"dropped {s['groups_dropped']}, in flight {s['groups_in_flight']}")
print(f"RL wall time {s['wall_time_s']:.0f} s; whole demo {time.time() - int(sys.argv[3]):.0f} s")
print(f"plot: {sys.argv[2]}; metrics: {sys.argv[1].rsplit('/', 1)[0]}/metrics.jsonl")
PY

#!/usr/bin/env bash
# Does RL still learn in bf16? The demo (configs/demo.yaml) per seed: the warm start (float32, as
# scripts/demo.sh makes it), then the same 80 steps of fully asynchronous RL from it twice: in
# float32, and with bf16 rollouts and a bf16 mixed-precision trainer (rollout.dtype=bf16
# trainer.precision=bf16). Prints a markdown table: greedy test accuracy before and after RL in
# each precision, the RL wall time, and the bf16 run's median rollout/trainer mismatch.
#   scripts/bf16_learning.sh [SEED ...]    (default: 1 2 3; needs a build: scripts/setup.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ASYNCRL_BUILD_DIR:-$ROOT/build}/asyncrl"
OUT="$ROOT/runs/bf16_learning"
cd "$ROOT"
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- 1 2 3
echo "| seed | before RL | after RL, float32 | after RL, bf16 | bf16 gain | RL s float32 / bf16 | bf16 mismatch_abs_mean (median) | mismatch_kl_k3 (median) |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for seed in "$@"; do
  D="$OUT/seed$seed"
  mkdir -p "$D"
  "$BIN" sft --config configs/demo.yaml runtime.run_dir="$D/sft" runtime.seed="$seed" \
    >"$D/sft.out" 2>"$D/sft.log"
  for prec in float32 bf16; do
    "$BIN" train --config configs/demo.yaml model.path="$D/sft/final" runtime.run_dir="$D/$prec" \
      runtime.seed="$seed" rollout.dtype="$prec" trainer.precision="$prec" \
      >"$D/$prec.out" 2>"$D/$prec.log"
  done
  python3 - "$D" "$seed" <<'PY'
import json, statistics, sys
d, seed = sys.argv[1], sys.argv[2]
f = json.load(open(f"{d}/float32/summary.json"))
b = json.load(open(f"{d}/bf16/summary.json"))
rows = [json.loads(line) for line in open(f"{d}/bf16/metrics.jsonl")]
mm = statistics.median(r["mismatch_abs_mean"] for r in rows if r.get("mismatch_tokens"))
k3 = statistics.median(r["mismatch_kl_k3"] for r in rows if r.get("mismatch_tokens"))
before = b["initial_eval_accuracy"]
assert abs(before - f["initial_eval_accuracy"]) < 1e-12, "both runs start from the same warm start"
print(f"| {seed} | {before:.4f} | {f['final_eval_accuracy']:.4f} | {b['final_eval_accuracy']:.4f} | "
      f"{100 * (b['final_eval_accuracy'] - before):+.1f} points | {f['wall_time_s']:.0f} / {b['wall_time_s']:.0f} | "
      f"{mm:.2e} | {k3:.2e} |")
PY
done

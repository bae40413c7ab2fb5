#!/usr/bin/env bash
# Does RL still learn in bf16, and how far apart are the rollout's and the trainer's log-probs?
# The demo (configs/demo.yaml) per seed: the warm start (float32, as scripts/demo.sh makes it),
# then the same 80 steps of fully asynchronous RL from it three times:
#   float32   rollouts and trainer in float32 (the default)
#   mixed     bf16 rollouts, float32 trainer (rollout.dtype=bf16): the mismatch bf16 rollouts make
#   bf16      bf16 rollouts and the bf16 mixed-precision trainer (trainer.precision=bf16 as well)
# Prints a markdown table: greedy test accuracy before and after RL in each, the RL wall times,
# and each bf16 variant's mismatch_abs_mean (median over the steps that had tokens of the
# trainer's own weights version; their count in brackets). A run whose summary.json exists is
# not run again (delete runs/bf16_learning to start over).
#   scripts/bf16_learning.sh [SEED ...]    (default: 1 2 3; needs a build: scripts/setup.sh)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ASYNCRL_BUILD_DIR:-$ROOT/build}/asyncrl"
OUT="$ROOT/runs/bf16_learning"
cd "$ROOT"
mkdir -p "$OUT"
[ $# -gt 0 ] || set -- 1 2 3
echo "| seed | before RL | after: float32 | after: mixed | after: bf16 | RL s: float32 / mixed / bf16 | mismatch_abs_mean: mixed | mismatch_abs_mean: bf16 |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
for seed in "$@"; do
  D="$OUT/seed$seed"
  mkdir -p "$D"
  [ -f "$D/sft/final/model.safetensors" ] ||
    "$BIN" sft --config configs/demo.yaml runtime.run_dir="$D/sft" runtime.seed="$seed" \
      >"$D/sft.out" 2>"$D/sft.log"
  for v in float32:float32:float32 mixed:bf16:float32 bf16:bf16:bf16; do
    IFS=: read -r name rollout trainer <<<"$v"
    [ -f "$D/$name/summary.json" ] && continue
    "$BIN" train --config configs/demo.yaml model.path="$D/sft/final" runtime.run_dir="$D/$name" \
      runtime.seed="$seed" rollout.dtype="$rollout" trainer.precision="$trainer" \
      >"$D/$name.out" 2>"$D/$name.log"
  done
  python3 - "$D" "$seed" <<'PY'
import json, statistics, sys
d, seed = sys.argv[1], sys.argv[2]
s = {n: json.load(open(f"{d}/{n}/summary.json")) for n in ("float32", "mixed", "bf16")}
before = s["float32"]["initial_eval_accuracy"]
for n in s:
    assert abs(s[n]["initial_eval_accuracy"] - before) < 1e-12, "every run starts from the same warm start"
def mismatch(n):
    rows = [json.loads(line) for line in open(f"{d}/{n}/metrics.jsonl")]
    m = [r["mismatch_abs_mean"] for r in rows if r.get("mismatch_tokens")]
    return f"{statistics.median(m):.2e} ({len(m)} steps)" if m else "no tokens"
acc = lambda n: f"{s[n]['final_eval_accuracy']:.4f} ({100 * (s[n]['final_eval_accuracy'] - before):+.1f})"
print(f"| {seed} | {before:.4f} | {acc('float32')} | {acc('mixed')} | {acc('bf16')} | "
      f"{s['float32']['wall_time_s']:.0f} / {s['mixed']['wall_time_s']:.0f} / {s['bf16']['wall_time_s']:.0f} | "
      f"{mismatch('mixed')} | {mismatch('bf16')} |")
PY
done

#!/usr/bin/env bash
# The learning check of the Hugging Face path (docs/hf-training.md, "Train a Hugging Face model
# with a Python reward"): per seed, a warm start of a tiny Qwen2 model with a real tokenizer.json
# (tests/fixtures/hf_tiny) and Qwen's chat template on 20,000 generated GSM8K-format problems,
# then 60 steps of fully asynchronous RL rewarded by the Python reference scorer. Prints one
# line per seed: greedy test accuracy before and after RL, and the scorer's failure counts.
#   scripts/hf_learning.sh [SEED ...]    (default: 1 2; needs a build and /usr/bin/python3 with msgpack)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${ASYNCRL_BUILD_DIR:-$ROOT/build}/asyncrl"
OUT="$ROOT/runs/hf_learning"
cd "$ROOT"
mkdir -p "$OUT/data"
python3 tests/fixtures/gsm8k/make_mini_gsm8k.py "$OUT/data" 20000 256
DATA=(data.train_path="$OUT/data/train.jsonl" data.test_path="$OUT/data/test.jsonl")
[ $# -gt 0 ] || set -- 1 2
for seed in "$@"; do
  D="$OUT/seed$seed"
  "$BIN" sft --config configs/gsm8k_tiny_hf.yaml runtime.run_dir="$D/sft" runtime.seed="$seed" \
    "${DATA[@]}" sft.steps=600 sft.stop_at_accuracy=0.4 sft.eval_every=20 sft.val_size=128 \
    >"$D.sft.out" 2>"$D.sft.log"
  "$BIN" train --config configs/gsm8k_tiny_hf.yaml model.tokenizer= model.path="$D/sft/final" \
    runtime.run_dir="$D/rl" runtime.seed="$seed" "${DATA[@]}" trainer.total_steps=60 \
    reward.function=external "reward.external.command=/usr/bin/python3 examples/reward/gsm8k_scorer.py" \
    >"$D.rl.out" 2>"$D.rl.log"
  python3 - "$D" "$seed" <<'PY'
import json, sys
d, seed = sys.argv[1], sys.argv[2]
sft = json.load(open(f"{d}/sft/sft_summary.json"))
s = json.load(open(f"{d}/rl/summary.json"))
print(f"seed {seed}: warm start {sft['steps']} steps; greedy accuracy {s['initial_eval_accuracy']:.4f} -> "
      f"{s['final_eval_accuracy']:.4f} after {s['steps']} RL steps ({s['status']}); "
      f"scorer failures {s['reward']['failures']} timeouts {s['reward']['timeouts']} {s['reward']['scorer']}")
PY
done

#!/usr/bin/env bash
# Runs one asyncrl binary through the CLI's commands on small, seeded jobs and keeps every output
# (stdout, stderr, run directories). Two such directories, from the binaries before and after a
# refactor, are compared by scripts/compare_cli_outputs.py, which masks times, ports and paths.
#   scripts/cli_outputs.sh BIN OUTDIR      (takes about a minute on 2 cores)
set -u
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN=$(readlink -f "${1:?asyncrl binary}")
O=${2:?output dir}
rm -rf "$O"
mkdir -p "$O"
O=$(readlink -f "$O")
cd "$ROOT"  # configs/ are relative to the repo root
t() {
  local name=$1
  shift
  timeout 900 "$BIN" "$@" >"$O/$name.out" 2>"$O/$name.err"
  echo "rc=$?" >>"$O/$name.out"
}
t config config -c configs/demo.yaml
t describe config -c configs/demo.yaml --describe
t sft sft -c configs/demo.yaml sft.steps=30 sft.stop_at_accuracy=1 sft.eval_every=15 \
  sft.val_size=32 runtime.run_dir="$O/sft"
M=$O/sft/final
t sync train -c configs/sync.yaml model.path="$M" trainer.total_steps=3 data.test_size=32 \
  runtime.run_dir="$O/sync"
t periodic train -c configs/periodic.yaml model.path="$M" trainer.total_steps=3 \
  data.test_size=32 runtime.run_dir="$O/periodic"
head -n 32 "$O/sync/data/test.jsonl" >"$O/test32.jsonl"
t eval eval -m "$M" -d "$O/test32.jsonl" -n 2 --temperature 1 --seed 5
t generate generate -m "$M" --prompt "12+34=" -n 3 --seed 3
echo '{"text": "12+34=46"}' | timeout 60 "$BIN" tokenize -m "$M" -i - >"$O/tokenize.out" 2>&1
t score_help score --help
t chaos_help chaos --help

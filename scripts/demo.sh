#!/usr/bin/env bash
# The main job on the built-in default: install what is missing, build, warm-start a small
# Qwen2-architecture model on the arithmetic task, and print its eval accuracy.
#   scripts/demo.sh [key=value ...]   (overrides for configs/demo.yaml)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ASYNCRL_TARGET=asyncrl_cli "$ROOT/scripts/setup.sh"
cd "$ROOT"
BIN="${ASYNCRL_BUILD_DIR:-$ROOT/build}/asyncrl"
CONFIG="configs/demo.yaml"
RUN_DIR="$("$BIN" config -c "$CONFIG" --get runtime.run_dir "$@")"

echo "== warm-start (asyncrl sft --config $CONFIG $*)"
"$BIN" sft --config "$CONFIG" "$@"

echo "== evaluation of $RUN_DIR/final on $RUN_DIR/data/test.jsonl"
"$BIN" eval --model "$RUN_DIR/final" --data "$RUN_DIR/data/test.jsonl" --samples 4 | tee "$RUN_DIR/eval.json"

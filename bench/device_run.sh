#!/usr/bin/env bash
# The GPU measurement as one bounded script, for a machine with a CUDA GPU and a Python that has
# torch and transformers (the lent GPU machine has both): builds the benchmark and the CLI
# against that Python's libtorch unless BUILD_DIR already has them, then runs
# bench/device_compare.py on the GPU and writes what it measured to OUT_DIR:
#   device_compare.json, device_compare.md (the docs/benchmarks.md table), nvidia-smi.txt,
#   device_run.log
#   bench/device_run.sh BUILD_DIR OUT_DIR [extra device_compare.py args]
# Env: PYTHON (default python3), PART_TIMEOUT (seconds per measured part, default 420; up to
# five parts: asyncrl, reference, big, e2e, char_vocab).
# The lent GPU machine has no apt: bench/gpu_session.sh builds there from the repo alone.
# The build needs the project's other libraries (CAF, msgpack, ...) where CMake finds them,
# e.g. a prefix in CMAKE_PREFIX_PATH; CMAKE_EXTRA adds cmake arguments.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${1:?usage: bench/device_run.sh BUILD_DIR OUT_DIR [device_compare.py args]}"
OUT="${2:?usage: bench/device_run.sh BUILD_DIR OUT_DIR [device_compare.py args]}"
shift 2
PY="${PYTHON:-python3}"
mkdir -p "$OUT"
LOG="$OUT/device_run.log"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$LOG"; }

nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || true
say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "python: $("$PY" -c 'import torch, transformers; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), transformers.__version__)' 2>&1 | tail -1)"
if [ ! -x "$BUILD/bench/bench_device_throughput" ] || [ ! -x "$BUILD/asyncrl" ]; then
  TORCH_CMAKE="$("$PY" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
  # shellcheck disable=SC2086 # CMAKE_EXTRA holds several arguments
  timeout 600 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DASYNCRL_BUILD_TESTS=OFF \
    -DCMAKE_PREFIX_PATH="$TORCH_CMAKE${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}" ${CMAKE_EXTRA:-} \
    >>"$LOG" 2>&1 || { say "configure failed (see device_run.log)"; exit 1; }
  timeout 900 cmake --build "$BUILD" -j "$(nproc)" --target asyncrl_cli bench_device_throughput \
    >>"$LOG" 2>&1 || { say "build failed (see device_run.log)"; exit 1; }
  say "built"
fi
timeout $(( 6 * ${PART_TIMEOUT:-420} )) "$PY" "$ROOT/bench/device_compare.py" --device cuda \
  --build "$BUILD" --python "$PY" --timeout "${PART_TIMEOUT:-420}" --out "$OUT/device_compare.json" \
  --markdown "$@" >"$OUT/device_compare.stdout" 2>>"$LOG"
rc=$?
sed -n '/^Vocabulary/,$p' "$OUT/device_compare.stdout" >"$OUT/device_compare.md"
say "device_compare: rc=$rc"
cat "$OUT/device_compare.md"
exit $rc

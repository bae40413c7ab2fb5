#!/usr/bin/env bash
# The whole GPU table of docs/benchmarks.md as one bounded job for the lent GPU machine (python3
# with PyTorch + CUDA and transformers, nvcc, cmake, ninja; no apt, no network), built from this
# repository alone: scripts/gpu_build.sh unpacks the Debian packages that scripts/gpu_prepare.sh
# copied into build-gpu-deps/ (run it here first; the run carries build-gpu-deps and
# tests/fixtures/hf) and builds build-gpu/; then bench/device_compare.py runs every part
# (asyncrl, the plain and strong references, the 1.5B shape, the end-to-end run, the char-
# vocabulary rows), each with its own time limit, never past the session's DEADLINE.
#   OUT=/tmp/out bash bench/gpu_session.sh
# Writes under $OUT as it goes (what a cut-short session leaves is still there):
#   session.log          one line per phase, then the table
#   configure.log, build.log
#   device_compare.json  rewritten after every part (parts_done lists them)
#   device_compare.json.reference.json  the reference's rows, rewritten after every row
#   device_compare.md    the tables (asyncrl next to the references, the 1.5B rows, the targets)
#   gpu_util.csv         nvidia-smi every 250 ms (time, utilization %, memory used MiB)
#   ablation.json        with ABLATIONS=1 and time left: one group per micro-batch, eager decode
# Env: DEADLINE (seconds for the whole session, build included; default 470, inside the 8
# minutes issue 41 allows), PART_TIMEOUT (seconds for one part, default 240), E2E_STEPS
# (default 8), ABLATIONS (default 0).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT="${OUT:?set OUT}"
mkdir -p "$OUT"
t0=$(date +%s)
DEADLINE=${DEADLINE:-470}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/session.log"; }
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown) (+ working tree), $(date -u +%FT%TZ)"
say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
say "python: $(python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available(), "transformers", transformers.__version__)' 2>&1 | tail -1)"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits \
  -lms 250 >"$OUT/gpu_util.csv" 2>/dev/null &
SMI=$!
trap 'kill $SMI 2>/dev/null' EXIT

# The build: at most half the session.
BUILD_TIMEOUT=$(( $(left) / 2 )) LOG_DIR="$OUT" bash scripts/gpu_build.sh \
  asyncrl_cli bench_device_throughput 2>&1 | tee -a "$OUT/session.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { say "build failed: see configure.log / build.log"; exit 1; }
# shellcheck disable=SC1090 # the prefix's libraries, for anything without the rpath
source <(bash scripts/gpu_build.sh --env)

# Every part, each bounded by PART_TIMEOUT and by what is left of DEADLINE.
dc_left=$(( $(left) - 10 ))
timeout "$dc_left" python3 bench/device_compare.py --device cuda --build build-gpu --python python3 \
  --timeout "${PART_TIMEOUT:-240}" --deadline $(( dc_left - 5 )) --e2e-steps "${E2E_STEPS:-8}" \
  --out "$OUT/device_compare.json" --markdown >"$OUT/device_compare.stdout" 2>"$OUT/device_compare.err"
say "device_compare: rc=$? ($(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("parts done:", ",".join(j["parts_done"]), j["part_seconds"])' "$OUT/device_compare.json" 2>&1 | tail -1))"
sed -n '/^Vocabulary/,$p' "$OUT/device_compare.stdout" >"$OUT/device_compare.md"
if [ ! -s "$OUT/device_compare.md" ] && [ -f "$OUT/device_compare.json" ]; then
  # Cut short before the end: the table from what the JSON kept.
  python3 -c 'import json, sys; sys.path.insert(0, "bench"); import device_compare as d
j = json.load(open(sys.argv[1])); print(d.markdown(j) if j.get("asyncrl") else "no asyncrl part")' \
    "$OUT/device_compare.json" >"$OUT/device_compare.md" 2>&1
fi
tee -a "$OUT/session.log" <"$OUT/device_compare.md"

# The state before issue 26 (one group per micro-batch, eager decode), when asked and time is left.
if [ "${ABLATIONS:-0}" = 1 ] && [ "$(left)" -ge 60 ]; then
  timeout $(( $(left) - 10 )) build-gpu/bench/bench_device_throughput --precisions bf16 \
    --micro-batch-tokens 0 --micro-batch 8 --cuda-graphs 0 --steps 2 --reps 1 --matmul 8192 \
    >"$OUT/ablation.json" 2>"$OUT/ablation.err"
  say "ablation (one group per micro-batch, eager decode): rc=$?"
fi
say "done, $(left) s of ${DEADLINE} s left"

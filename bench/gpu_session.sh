#!/usr/bin/env bash
# The whole GPU measurement of docs/benchmarks.md as one bounded script, for the lent GPU
# machine. It expects a build kit in .gpu-kit (the Debian libraries the build needs and a
# device-build.sh that configures against the machine's libtorch into build-gpu/). Writes under $OUT:
#   session.log (summary lines), device_compare.{json,md} (asyncrl next to plain PyTorch and HF
#   generate(), and the end-to-end fully async run), ablation.json (the same benchmark with
#   one-group micro-batches and eager decode: the state before issue 26), big.json (the
#   Qwen2.5-1.5B shape), build logs.
#   OUT=/tmp/out bash bench/gpu_session.sh
# Env: ABLATIONS=0 skips the two ablation runs; DEADLINE (seconds, default 570) bounds the whole
# session: the 1.5B-shape run gets what is left, BIG_TIMEOUT at most (default 200), with
# BIG_CHECKPOINTING=1 (trainer.activation_checkpointing). gpu_util.csv samples nvidia-smi
# throughout (time, utilization %, memory used MiB).
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:?set OUT}"
mkdir -p "$OUT"
t0=$(date +%s)
DEADLINE=${DEADLINE:-570}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/session.log"; }
say "commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits \
  -lms 250 >"$OUT/gpu_util.csv" 2>/dev/null &
SMI=$!
trap 'kill $SMI 2>/dev/null' EXIT
OUT="$OUT" bash .gpu-kit/device-build.sh bench_device_throughput >"$OUT/build_summary.txt" 2>&1
say "build bench: rc=$? $(tail -1 "$OUT/build_summary.txt")"
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
cmake --build build-gpu -j "$(nproc)" --target asyncrl_cli >>"$OUT/build.log" 2>&1
say "build cli: rc=$?"
B=build-gpu/bench/bench_device_throughput
# The measured table: asyncrl (bf16 and float32), the PyTorch/HF reference, the e2e run.
PART_TIMEOUT=${PART_TIMEOUT:-150} timeout 300 bash bench/device_run.sh build-gpu "$OUT/dc" \
  --e2e-steps "${E2E_STEPS:-12}" >"$OUT/device_run.txt" 2>&1
say "device_compare: rc=$?"
cp "$OUT/dc/device_compare.json" "$OUT/dc/device_compare.md" "$OUT/" 2>/dev/null
sed -n '/^| /p' "$OUT/device_compare.md" 2>/dev/null | head -20 | tee -a "$OUT/session.log"
# Ablation: what each change is worth, on the same machine in the same run.
if [ "${ABLATIONS:-1}" = 1 ]; then
timeout 75 $B --precisions bf16 --micro-batch-tokens 0 --micro-batch 8 --cuda-graphs 0 \
  --steps 2 --reps 1 --matmul 1024 >"$OUT/ablation.json" 2>"$OUT/ablation.err"
say "ablation (one group per micro-batch, eager decode): rc=$?"
timeout 60 $B --precisions bf16 --cuda-graphs 0 --steps 2 --reps 1 --matmul 1024 \
  --objectives policy_only >"$OUT/nographs.json" 2>>"$OUT/ablation.err"
say "ablation (token budget, eager decode): rc=$?"
fi
big_t=$(( $(left) - 15 )); [ "$big_t" -gt "${BIG_TIMEOUT:-200}" ] && big_t=${BIG_TIMEOUT:-200}
if [ "$big_t" -ge 30 ]; then
  timeout "$big_t" $B --shape qwen2.5-1.5b --precisions bf16 --batch 128 --prompt 64 \
    --new-tokens 448 --micro-batch-tokens 8192 --objectives rl --steps 1 --reps 1 --matmul 1024 \
    --activation-checkpointing "${BIG_CHECKPOINTING:-1}" >"$OUT/big.json" 2>"$OUT/big.err"
  say "qwen2.5-1.5b shape, 128 x 512 tokens, checkpointing ${BIG_CHECKPOINTING:-1}: rc=$? (${big_t} s allowed)"
else
  say "qwen2.5-1.5b shape: skipped, ${big_t} s left"
fi
python3 - "$OUT" <<'PY' | tee -a "$OUT/session.log"
import json, sys
o = sys.argv[1]
def load(f):
    try:
        t = open(f"{o}/{f}").read(); i = t.find("\n{")
        return json.loads(t[i + 1:] if i >= 0 else t)
    except Exception as e:
        print(f, "unreadable:", e); return None
for f in ("ablation.json", "nographs.json", "big.json"):
    j = load(f)
    if not j: continue
    for r in j["trainer"]:
        print(f, r["precision"], r["objective"], "train tok/s", round(r["tokens_per_s"]),
              "ops/token", round(r["aten_ops_per_token"], 1), "peak GB",
              round(r.get("cuda_peak_allocated_bytes", 0) / 2**30, 1))
    for r in j["generation"]:
        print(f, r["dtype"], "gen tok/s", round(r["tokens_per_s"]), "ops/token",
              round(r["aten_ops_per_token"], 2), "graphs", r["graphs_captured"],
              "sync s", round(r["weight_sync_s"], 4))
j = load("device_compare.json")
if j and j.get("e2e"):
    print("e2e gpu_busy", j["e2e"].get("gpu_busy"), "error", j["e2e"].get("error", "")[:300])
PY
say "done"

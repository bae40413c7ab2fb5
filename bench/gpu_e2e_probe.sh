#!/usr/bin/env bash
# On the lent GPU machine (kit in .gpu-kit, as bench/gpu_session.sh): builds the CLI and runs
# bench/e2e_probe.py's variants of the fully async end-to-end run; writes under $OUT
# e2e_probe.json, probe.log and the build logs.
#   OUT=/tmp/out bash bench/gpu_e2e_probe.sh [VARIANTS]
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${OUT:?set OUT}"
mkdir -p "$OUT"
t0=$(date +%s)
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$OUT/probe.log"; }
OUT="$OUT" bash .gpu-kit/device-build.sh asyncrl_cli >"$OUT/build_summary.txt" 2>&1
say "build cli: rc=$? $(tail -1 "$OUT/build_summary.txt")"
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
timeout "${PROBE_TIMEOUT:-300}" python3 bench/e2e_probe.py --build build-gpu --out "$OUT" \
  --timeout "${VARIANT_TIMEOUT:-70}" \
  --variants "${1:-fully_async,sync,fully_async_no_ref,sync_no_ref,fully_async_chunk48}" \
  2>&1 | cut -c1-600 | tee -a "$OUT/probe.log"
say "probe: rc=${PIPESTATUS[0]}"

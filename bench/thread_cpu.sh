#!/usr/bin/env bash
# CPU time per thread of one `asyncrl train` run, per optimizer step, between two step counts:
# where the CPU time outside compute regions (metrics.jsonl overhead_cpu_share) is spent.
#   bench/thread_cpu.sh CONFIG RUN_DIR FROM TO [KEY=VALUE ...]
# Runs `asyncrl train -c CONFIG trainer.total_steps=TO+5 runtime.run_dir=RUN_DIR KEY=VALUE...`,
# reads utime + stime of every thread (/proc/PID/task/*/stat) when metrics.jsonl has FROM lines
# and again at TO, and prints one JSON object: per thread that ran, its name, tid and ms of CPU
# per step, and the run's median overhead_cpu_share (steps after the first two). Thread
# names: `caf.actor` are the detached compute roles (rollouters, trainer); CAF's cooperative
# scheduler threads (Reward, queue, controller, synchronizer) inherit the name `caf.multiplexer`
# here; `caf.clock` is CAF's timer thread. Linux only; every wait is bounded (10 min); the run is
# killed on exit.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CFG=${1:?config}; RUN=${2:?run dir}; FROM=${3:?from step}; TO=${4:?to step}
shift 4
BIN=${ASYNCRL_BIN:-$ROOT/build/asyncrl}
(( FROM >= 1 && TO > FROM )) || { echo "need 1 <= FROM < TO" >&2; exit 2; }
rm -rf "$RUN"
timeout 600 "$BIN" train -c "$CFG" trainer.total_steps=$((TO + 5)) runtime.run_dir="$RUN" "$@" \
  >"$RUN.log" 2>&1 &
WRAP=$!
trap 'pkill -9 -P $WRAP 2>/dev/null || true; kill -9 $WRAP 2>/dev/null || true' EXIT

# The asyncrl process under the timeout wrapper.
PID=""
for _ in $(seq 100); do
  PID=$(pgrep -P "$WRAP" || true)
  [[ -n "$PID" ]] && break
  sleep 0.1
done
[[ -n "$PID" ]] || { echo "asyncrl did not start; see $RUN.log" >&2; exit 1; }

steps() { [[ -f "$RUN/metrics.jsonl" ]] && wc -l <"$RUN/metrics.jsonl" || echo 0; }
wait_step() {
  for _ in $(seq 6000); do
    [[ $(steps) -ge $1 ]] && return
    kill -0 "$PID" 2>/dev/null || { echo "the run ended before step $1; see $RUN.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "no step $1 within 10 min" >&2
  exit 1
}
# tid name ticks, one line per thread (comm has no spaces for these threads).
snap() {
  for t in /proc/"$PID"/task/*; do
    echo "$(basename "$t") $(cat "$t/comm") $(awk '{print $14 + $15}' "$t/stat")"
  done
}

wait_step "$FROM"
A=$(snap); a=$(steps)
wait_step "$TO"
B=$(snap); b=$(steps)
python3 - "$a" "$b" "$(getconf CLK_TCK)" "$RUN/metrics.jsonl" <<PY
import json, statistics, sys
a, b, hz = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def parse(text):
    out = {}
    for line in text.strip().splitlines():
        tid, name, ticks = line.split()
        out[tid] = (name, int(ticks))
    return out
A, B = parse("""$A"""), parse("""$B""")
threads = []
for tid, (name, ticks) in sorted(B.items(), key=lambda kv: -kv[1][1]):
    ms = (ticks - A.get(tid, (name, 0))[1]) * 1000.0 / hz / (b - a)
    if ms > 0:
        threads.append({"name": name, "tid": int(tid), "ms_per_step": round(ms, 3)})
# The share the e2e bench reports: the median over steps, the first two (warm-up) left out.
rows = [json.loads(l) for l in open(sys.argv[4]) if l.strip()][2:]
shares = [r["overhead_cpu_share"] for r in rows if r.get("overhead_cpu_share") is not None]
print(json.dumps({
    "benchmark": "thread_cpu", "from_step": a, "to_step": b, "clock_ticks_per_s": hz,
    "threads": threads, "all_threads_ms_per_step": round(sum(t["ms_per_step"] for t in threads), 3),
    "median_overhead_cpu_share": statistics.median(shares) if shares else None,
    "steps_in_median": len(shares)}, indent=1))
PY

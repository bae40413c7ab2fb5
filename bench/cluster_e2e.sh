#!/usr/bin/env bash
# Local vs remote rollouters end to end: the same periodic run of configs/chaos/base.yaml
# (60 steps, a tiny model, so per-message costs dominate) with 2 rollouters in the train process,
# then with 2 `asyncrl worker` processes on loopback. Prints one JSON object.
#   bench/cluster_e2e.sh [ASYNCRL] [WORK_DIR] [key=value ...]   (overrides go to both runs)
# The 55 MB weight-sync measurement in docs/benchmarks.md: the overrides
#   trainer.total_steps=6 model.init.hidden_size=512 model.init.intermediate_size=1536
#   model.init.num_hidden_layers=4
#   model.init.num_attention_heads=8 model.init.num_key_value_heads=8
#   async_training.sync_timeout_ms=60000 runtime.progress_timeout_s=300
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=${1:-$ROOT/build/asyncrl}
W=${2:-$(mktemp -d)}
A=(trainer.total_steps=60 checkpoint.every_steps=0 runtime.log_level=warn "${@:3}")
pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null || true; done' EXIT
rm -rf "$W/local" "$W/remote"
mkdir -p "$W"
timeout 120 "$BIN" train -c "$ROOT/configs/chaos/base.yaml" "${A[@]}" runtime.run_dir="$W/local" \
  cluster.listen=off >/dev/null 2>&1
timeout 120 "$BIN" train -c "$ROOT/configs/chaos/base.yaml" "${A[@]}" runtime.run_dir="$W/remote" \
  rollout.num_workers=0 >/dev/null 2>&1 &
T=$!
pids+=("$T")
for _ in $(seq 300); do [[ -f "$W/remote/cluster.json" ]] && break; sleep 0.1; done
P=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$W/remote/cluster.json")
for _ in 1 2; do
  timeout 120 "$BIN" worker --connect "127.0.0.1:$P" --secret-file "$W/remote/run.secret" \
    runtime.log_level=warn >/dev/null 2>&1 &
  pids+=("$!")
done
wait "$T"
python3 - "$W" "${A[@]}" <<'PY'
import json, sys
w = sys.argv[1]
out = {"benchmark": "cluster_e2e", "config": "configs/chaos/base.yaml periodic", "overrides": sys.argv[2:]}
for k in ("local", "remote"):
    s = json.load(open(f"{w}/{k}/summary.json"))
    m = [json.loads(l) for l in open(f"{w}/{k}/metrics.jsonl")]
    out[k] = {"wall_time_s": s["wall_time_s"], "steps": s["steps"],
              "mean_sync_time_ms": sum(x["sync_time_ms"] for x in m[1:]) / max(1, len(m) - 1),
              "sync_bytes": m[-1]["sync_bytes"], "params_sha256": s["params_sha256"]}
out["wall_ratio_remote_to_local"] = out["remote"]["wall_time_s"] / out["local"]["wall_time_s"]
out["same_weights"] = out["remote"]["params_sha256"] == out["local"]["params_sha256"]
print(json.dumps(out, indent=1))
PY

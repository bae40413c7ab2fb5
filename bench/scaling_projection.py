#!/usr/bin/env python3
"""Projected step times for multi-GPU placements, from `asyncrl simulate` (docs/scaling.md).

Nothing here is measured on the placements it reports: the simulator replays the run's
scheduling rules with per-device costs. The 0.5B costs are the H200 measurements of
docs/benchmarks.md (2026-11-27); the 7B costs and every cross-GPU weight-sync time are
assumptions, written below with their reasons. Prints one JSON object (machine-readable) and,
with --markdown, the table docs/scaling.md shows.

  python3 bench/scaling_projection.py [--asyncrl build/asyncrl] [--markdown]
"""
import argparse
import json
import subprocess
import sys

# Per device, ms. "measured": bench/results/device_compare_h200.json (bf16, batch 128):
#   generation 24.9k tokens/s at batch 128 -> 5.14 ms per decode step, split as 3.0 ms fixed +
#   0.0167 ms per sequence (the split is assumed; the sum at 128 is measured);
#   trainer (rl objective) 52.3k tokens/s -> 0.0191 ms per trained token.
# 7B (Qwen2.5-7B, 7.6B parameters, 15.4x 0.5B's 0.49B): training per token scaled by 15.4
#   (same MFU); a decode step reads 15.2 GB of bf16 weights, 3.2 ms at 4.8 TB/s, plus the 0.5B
#   step's launch overhead -> 8 ms fixed + 0.03 ms per sequence. Assumed, not measured.
# Weight sync: bf16 weights broadcast over NVLink at an assumed 100 GB/s inside a node and
#   25 GB/s between nodes (NCCL over 200 Gb/s InfiniBand); 0.5B = 0.99 GB, 7B = 15.2 GB.
SHAPES = {
    "0.5b": {"decode_base_ms": 3.0, "decode_per_seq_ms": 0.0167, "train_per_token_ms": 0.0191,
             "prefill_per_token_ms": 0.002, "weights_gb": 0.99},
    "7b": {"decode_base_ms": 8.0, "decode_per_seq_ms": 0.03, "train_per_token_ms": 0.294,
           "prefill_per_token_ms": 0.03, "weights_gb": 15.2},
}
NVLINK_GBPS, IB_GBPS = 100.0, 25.0
DP_EFFICIENCY = 0.9  # assumed speed-up per added trainer GPU (gradient all-reduce overhead)

# GSM8K-like: 64 prompts x 8 responses, lognormal lengths (median 200, long tail to 1024).
WORKLOAD = ["data.train_batch_size=64", "trainer.ppo_mini_batch_size=64", "rollout.n=8",
            "rollout.max_batch=128", "rollout.max_new_tokens=1024",
            "workload.lengths=lognormal", "workload.median=200", "workload.sigma=0.6",
            "workload.min=16", "workload.max=1024", "simulate.prompt_tokens=128",
            "trainer.total_steps=30", "simulate.warmup_steps=5", "simulate.reward_ms=1"]


def simulate(exe, shape, mode, devices, train_devices, nodes):
    c = SHAPES[shape]
    gbps = NVLINK_GBPS if nodes == 1 else IB_GBPS
    sync_ms = c["weights_gb"] / gbps * 1000
    over = WORKLOAD + [f"simulate.{k}={v}" for k, v in c.items() if k != "weights_gb"]
    over += [f"simulate.sync_ms={sync_ms:.1f}", "simulate.train_step_ms=20"]
    if mode == "sync_colocated":
        over += ["async_training.mode=sync", "async_training.colocate=true",
                 f"simulate.devices={devices}",
                 f"simulate.train_scaling={DP_EFFICIENCY * devices:.2f}"]
    else:
        rollout = devices - train_devices
        over += ["async_training.mode=fully_async", "async_training.staleness_threshold=1",
                 "async_training.partial_rollout=true", "async_training.max_staleness=2",
                 f"simulate.rollout_devices={rollout}", f"simulate.train_devices={train_devices}",
                 f"simulate.train_scaling={DP_EFFICIENCY * train_devices:.2f}"]
    out = subprocess.run([exe, "simulate", "-c", "configs/sync.yaml"] + over,
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    r.update({"shape": shape, "placement": mode, "devices": devices, "nodes": nodes,
              "train_gpus": devices if mode == "sync_colocated" else train_devices,
              "sync_ms": round(sync_ms, 1)})
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--asyncrl", default="build/asyncrl")
    ap.add_argument("--markdown", action="store_true")
    a = ap.parse_args()
    rows = []
    for shape in ("0.5b", "7b"):
        for devices, nodes in ((8, 1), (16, 2)):
            rows.append(simulate(a.asyncrl, shape, "sync_colocated", devices, devices, nodes))
            for t in sorted({devices // 8, devices // 4, 3 * devices // 8, devices // 2}):
                rows.append(simulate(a.asyncrl, shape, "fully_async", devices, t, nodes))
    result = {"projected": True, "source": "asyncrl simulate", "shapes": SHAPES,
              "dp_efficiency": DP_EFFICIENCY, "rows": rows}
    if not a.markdown:
        print(json.dumps(result, indent=2))
        return
    print("| shape | GPUs (nodes) | placement | rollout:train GPUs | sync ms | s/step | "
          "trained tokens/s | vs colocated sync | trainer idle | rollout idle |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    base = {}
    for r in rows:
        key = (r["shape"], r["devices"])
        if r["placement"] == "sync_colocated":
            base[key] = r["tokens_trained_per_s"]
        split = "shared" if r["placement"] == "sync_colocated" else \
            f"{r['devices'] - r['train_gpus']}:{r['train_gpus']}"
        print(f"| {r['shape']} | {r['devices']} ({r['nodes']}) | {r['placement']} | {split} | "
              f"{r['sync_ms']} | {r['mean_step_s']:.2f} | {r['tokens_trained_per_s']:.0f} | "
              f"{r['tokens_trained_per_s'] / base[key]:.2f}x | {r['trainer_idle_ratio']:.2f} | "
              f"{r['rollout_idle_ratio']:.2f} |")


if __name__ == "__main__":
    sys.exit(main())

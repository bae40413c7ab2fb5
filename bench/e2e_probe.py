#!/usr/bin/env python3
"""Where the fully async run's trainer time goes on one GPU: the end-to-end run of
bench/device_compare.py in a few variants, each with its metrics.jsonl kept, GPU busy share and
tokens/s. Variant `sync` never overlaps training with generation, so its trainer tokens/s is the
trainer actor's speed without a rollouter beside it on the GPU.

  python3 bench/e2e_probe.py --build build-gpu --out OUT_DIR [--variants fully_async,sync]
Writes OUT_DIR/e2e_probe.json: per variant, device_compare.e2e_run's figures and the metrics rows.
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import device_compare  # noqa: E402

SYNC = ["async_training.mode=sync", "async_training.staleness_threshold=0",
        "async_training.partial_rollout=false"]
VARIANTS = {
    "fully_async": [],
    "sync": SYNC,
    "fully_async_chunk48": ["rollout.chunk_tokens=48"],
    "fully_async_no_ref": ["trainer.compute_ref=false"],
    "sync_no_ref": SYNC + ["trainer.compute_ref=false"],
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--device", default="cuda")
    p.add_argument("--variants", default="fully_async,sync,fully_async_chunk48")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--timeout", type=int, default=90)
    a = p.parse_args()
    args = argparse.Namespace(build=a.build, device=a.device, e2e_precision="bf16", new_tokens=48,
                              batch=128, e2e_steps=a.steps, micro_batch_tokens=8192,
                              timeout=a.timeout)
    os.makedirs(a.out, exist_ok=True)
    results = {}
    for name in a.variants.split(","):
        with tempfile.TemporaryDirectory(prefix="e2e_probe.") as work:
            r = device_compare.e2e_run(args, "qwen2.5-0.5b" if a.device.startswith("cuda") else "small",
                                       work, VARIANTS[name])
            m = os.path.join(work, "e2e", "metrics.jsonl")
            if os.path.exists(m):  # kept inside the one JSON: the lent machine returns few files
                r["metrics"] = [json.loads(line) for line in open(m)]
        results[name] = r
        with open(os.path.join(a.out, "e2e_probe.json"), "w") as f:  # after each: a timeout keeps the rest
            json.dump(results, f, indent=2)
        print(name, json.dumps({k: v for k, v in r.items() if k not in ("command", "metrics")}),
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

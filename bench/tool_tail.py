#!/usr/bin/python3
"""Tool-latency tail benchmark (issue 38 item 7, docs/episodes.md): multi-turn episodes on the
built-in tool task whose every calculator call waits a log-normal latency (median
--median-ms, p99 = --p99-ratio x median), in three ways, one after the other on the same model,
seed and cores:

  async_interrupt  fully async with partial rollout; a weight sync pauses at once, episodes at
                   their tool continue under the new weights (asyncrl's default)
  async_wait       the same, but a sync first waits for every outstanding tool call
                   (env.sync_waits_for_tools=true: what verl does)
  sync             colocated synchronous training (generation and training take turns)

For each it reports generated tokens per second of wall time (the model's tokens: the tool's
are not generated) and the trainer's idle share, from the run's summary.json and
metrics.jsonl, and the ratio async_interrupt / async_wait (the issue's target: >= 1.3).

    bench/tool_tail.py --model DIR [--bin build/asyncrl] [--steps 20] [--median-ms 40]
                       [--p99-ratio 20] [--out bench/results] [--set KEY=VALUE ...]

--model is a warm-started tool model (asyncrl sft -c configs/tools_demo.yaml ...: its episodes
must call the tool). Prints one JSON object per run, then a summary object, each on one line;
writes tool_tail.json into --out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

VARIANTS = {
    "async_interrupt": ["async_training.mode=fully_async", "env.sync_waits_for_tools=false"],
    "async_wait": ["async_training.mode=fully_async", "env.sync_waits_for_tools=true"],
    "sync": ["async_training.mode=sync", "async_training.staleness_threshold=0",
             "async_training.partial_rollout=false"],
}


def run(args, name, extra, root):
    run_dir = os.path.join(root, name)
    cmd = [args.bin, "train", "-c", "configs/tools_demo.yaml", f"model.path={args.model}",
           f"runtime.run_dir={run_dir}", f"trainer.total_steps={args.steps}",
           f"env.latency_median_ms={args.median_ms}", f"env.latency_p99_ratio={args.p99_ratio}",
           "data.test_size=32"] + extra + args.set
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=args.timeout)
    if done.returncode != 0:
        sys.exit(f"tool_tail: {name} failed ({done.returncode}): {done.stderr[-2000:]}")
    summary = json.load(open(os.path.join(run_dir, "summary.json")))
    steps = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    wall = sum(s["step_time_s"] for s in steps)
    tokens = sum(s["tokens_generated"] for s in steps)
    idle = sum(s["step_time_s"] * s["trainer_idle_ratio"] for s in steps)
    env_calls = sum(r.get("env_calls", 0) for r in summary.get("rollouters", []))
    return {"variant": name, "steps": len(steps), "wall_s": wall, "tokens_generated": tokens,
            "tokens_per_s": tokens / wall if wall > 0 else 0.0,
            "trainer_idle_s": idle, "trainer_idle_share": idle / wall if wall > 0 else 0.0,
            "env_calls": env_calls, "final_eval_accuracy": summary.get("final_eval_accuracy")}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--bin", default="build/asyncrl")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--median-ms", type=float, default=40)
    p.add_argument("--p99-ratio", type=float, default=20)
    p.add_argument("--out", default="bench/results")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE for every run")
    args = p.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="tool_tail.") as root:
        for name, extra in VARIANTS.items():
            results.append(run(args, name, extra, root))
            print(json.dumps(results[-1]), flush=True)
    by = {r["variant"]: r for r in results}
    summary = {
        "median_ms": args.median_ms, "p99_ratio": args.p99_ratio, "steps": args.steps,
        "speedup.async_interrupt_vs_async_wait":
            by["async_interrupt"]["tokens_per_s"] / max(by["async_wait"]["tokens_per_s"], 1e-9),
        "speedup.async_interrupt_vs_sync":
            by["async_interrupt"]["tokens_per_s"] / max(by["sync"]["tokens_per_s"], 1e-9),
        "target.async_interrupt_vs_async_wait": 1.3,
        "runs": results,
    }
    print(json.dumps({k: v for k, v in summary.items() if k != "runs"}), flush=True)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tool_tail.json"), "w") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()

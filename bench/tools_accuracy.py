#!/usr/bin/python3
"""The tool demo's accuracy table (issue 38 item 6, docs/episodes.md): RL from one warm-started
tool model (configs/tools_demo.yaml) in each of --modes for each of --seeds, and the greedy test
accuracy of the warm start and of every RL result, with the calculator and without it (every
call answered "error: tool unavailable").

    bench/tools_accuracy.py --model DIR [--bin build/asyncrl] [--seeds 1 2 3]
                            [--modes fully_async periodic] [--out bench/results] [--set K=V ...]
                            [--keep DIR]

--model: `asyncrl sft -c configs/tools_demo.yaml` output (its final/ directory). The seed is
runtime.seed of the RL run (its sampling and data order), not of the warm start, which is shared.
Prints one JSON object per row, each on one line, then a Markdown table; writes
tools_accuracy.json into --out.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

# What a mode needs besides async_training.mode on top of tools_demo.yaml (fully async).
MODES = {
    "fully_async": [],
    "periodic": ["async_training.staleness_threshold=0", "async_training.partial_rollout=false"],
    "sync": ["async_training.staleness_threshold=0", "async_training.partial_rollout=false"],
}
EVAL = ["--tool", "calculator", "--max-turns", "4", "--max-new-tokens", "24",
        "--max-episode-tokens", "112"]


def evaluate(args, model, data, tool_off):
    cmd = [args.bin, "eval", "-m", model, "-d", data] + EVAL + (["--tool-off"] if tool_off else [])
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])["pass@1"]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--bin", default="build/asyncrl")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--modes", nargs="+", default=["fully_async", "periodic"], choices=MODES)
    p.add_argument("--out", default="bench/results")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    p.add_argument("--set", action="append", default=[], help="KEY=VALUE for every run")
    p.add_argument("--keep", help="keep the runs (their final models) in this directory")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="tools_accuracy.") as tmp:
        root = args.keep or tmp
        os.makedirs(root, exist_ok=True)
        data = os.path.join(root, "data")
        subprocess.run([args.bin, "data", "-c", "configs/tools_demo.yaml", "-o", data] + args.set,
                       check=True, capture_output=True, timeout=600)
        test = os.path.join(data, "test.jsonl")
        base = {"run": "warm start", "mode": "", "seed": "",
                "with_tool": evaluate(args, args.model, test, False),
                "without_tool": evaluate(args, args.model, test, True)}
        print(json.dumps(base), flush=True)
        rows.append(base)
        for mode in args.modes:
            for seed in args.seeds:
                run_dir = os.path.join(root, f"{mode}-s{seed}")
                cmd = [args.bin, "train", "-c", "configs/tools_demo.yaml",
                       f"model.path={args.model}", f"runtime.run_dir={run_dir}",
                       f"runtime.seed={seed}", f"async_training.mode={mode}"] + MODES[mode] + args.set
                done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                      text=True, timeout=args.timeout)
                if done.returncode != 0:
                    sys.exit(f"tools_accuracy: {mode} seed {seed} failed: {done.stderr[-2000:]}")
                s = json.load(open(os.path.join(run_dir, "summary.json")))
                final = os.path.join(run_dir, "final")
                row = {"run": "RL", "mode": mode, "seed": seed, "steps": s["steps"],
                       "wall_s": s["wall_time_s"],
                       "with_tool": evaluate(args, final, test, False),
                       "without_tool": evaluate(args, final, test, True),
                       "run_final_eval": s.get("final_eval_accuracy")}
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("| run | mode | seed | greedy accuracy with the tool | without |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['run']} | {r['mode']} | {r['seed']} | {r['with_tool']:.4f} | "
              f"{r['without_tool']:.4f} |")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "tools_accuracy.json"), "w") as f:
        json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()

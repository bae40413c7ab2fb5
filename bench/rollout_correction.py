#!/usr/bin/python3
"""Rollout correction on the demo (issue 39 item 5, docs/algorithms.md §18): from one warm start,
RL with bf16 rollouts and a float32 trainer under each --variants (no correction, TIS, MIS, ...;
or one precision on both sides with the default or the batch-invariant kernels, §19)
for each --configs and --seeds, and per run the greedy test accuracy before and after, the
mismatch and correction metrics averaged over the steps, and the mean response length of the
groups generated and trained (the staleness length bias, item 3).

    bench/rollout_correction.py --warm DIR [--bin build/asyncrl] [--seeds 1 2 3]
        [--configs demo fully_async_stale] [--variants none tis mis] [--out bench/results]
        [--runs-dir runs/rc] [key=value ...]

--warm: `asyncrl sft -c configs/demo.yaml` output (its final/ directory), shared by every run;
the seed is runtime.seed of the RL run. Trailing key=value arguments go to every run. Prints one
JSON object per run on stdout as it finishes, then a Markdown table; writes
rollout_correction.json into --out.
"""
import argparse
import json
import os
import subprocess
import sys

BASE = ["rollout.dtype=bf16", "trainer.precision=float32"]
VARIANTS = {
    "none": [],
    "tis": ["algorithm.rollout_correction.is=token", "algorithm.rollout_correction.is_threshold=2"],
    "tis_seq": ["algorithm.rollout_correction.is=sequence",
                "algorithm.rollout_correction.is_threshold=2"],
    "mis": ["algorithm.rollout_correction.rs=token", "algorithm.rollout_correction.rs_threshold=2"],
    "mis_geo": ["algorithm.rollout_correction.rs=geometric",
                "algorithm.rollout_correction.rs_threshold=1.05"],
    # One precision on both sides (item 4): the default kernels, then the batch-invariant ones.
    "float32": ["rollout.dtype=float32"],
    "batch_invariant": ["rollout.dtype=float32", "rollout.batch_invariant=true"],
    "bf16_both": ["trainer.precision=bf16"],
    "batch_invariant_bf16": ["trainer.precision=bf16", "rollout.batch_invariant=true"],
    # DAPO's dynamic sampling (item 2): all-equal groups replaced until a step has its batch.
    "refill": ["algorithm.filter_groups=true", "algorithm.refill=true"],
}
MEANS = ["mismatch_abs_mean", "mismatch_kl_k3", "rc_kl_k3", "rc_weight_mean",
         "rc_truncated_frac", "rc_rejected_frac", "staleness_max"]
MAXES = ["mismatch_abs_max", "rc_weight_max"]


def run_one(args, config, variant, seed, extra):
    run_dir = os.path.join(args.runs_dir, f"{config}-{variant}-s{seed}")
    cmd = [args.bin, "train", "-c", f"configs/{config}.yaml", f"model.path={args.warm}",
           f"runtime.run_dir={run_dir}", f"runtime.seed={seed}"] + BASE + VARIANTS[variant] + extra
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=args.timeout)
    row = {"config": config, "variant": variant, "seed": seed, "cmd": " ".join(cmd)}
    if done.returncode != 0:
        row["error"] = done.stderr[-1500:]
        return row
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    steps = [json.loads(x) for x in open(os.path.join(run_dir, "metrics.jsonl"))]
    steps = [x for x in steps if "tokens_trained" in x]
    row.update(initial=s.get("initial_eval_accuracy"), final=s.get("final_eval_accuracy"),
               steps=s["steps"], wall_s=round(s["wall_time_s"], 1),
               groups_generated=s["groups_generated"], groups_trained=s["groups_trained"],
               groups_dropped=s["groups_dropped"], groups_filtered=s.get("groups_filtered", 0),
               tokens_generated=s["tokens_generated"])
    for k in MEANS:
        vals = [x[k] for x in steps if k in x]
        row[k] = sum(vals) / len(vals) if vals else None
    for k in MAXES:
        vals = [x[k] for x in steps if k in x]
        row[k] = max(vals) if vals else None
    # Mean response length: generated (every group the rollouters finished) against trained.
    g = s["groups_generated"] * args.group_size
    row["len_generated"] = s["tokens_generated"] / g if g else None
    trained = sum(x["samples_trained"] for x in steps)
    row["len_trained"] = s["tokens_trained"] / trained if trained else None
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--warm", required=True)
    p.add_argument("--bin", default="build/asyncrl")
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--configs", nargs="+", default=["demo", "fully_async_stale"])
    p.add_argument("--variants", nargs="+", default=["none", "tis", "mis"], choices=VARIANTS)
    p.add_argument("--group-size", type=int, default=8, help="rollout.n of the configs")
    p.add_argument("--out", default="bench/results")
    p.add_argument("--runs-dir", default="runs/rc")
    p.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    args, extra = p.parse_known_args()
    rows = []
    for config in args.configs:
        for seed in args.seeds:
            for variant in args.variants:
                row = run_one(args, config, variant, seed, extra)
                print(json.dumps(row), flush=True)
                rows.append(row)
    print("| config | variant | seed | before | after | mismatch mean / max | rc_kl_k3 | "
          "weight mean / max | truncated | rejected | len gen / trained |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    f = lambda v, d=4: "—" if v is None else f"{v:.{d}f}"
    for r in rows:
        if "error" in r:
            print(f"| {r['config']} | {r['variant']} | {r['seed']} | failed | | | | | | | |")
            continue
        print(f"| {r['config']} | {r['variant']} | {r['seed']} | {f(r['initial'])} | "
              f"{f(r['final'])} | {f(r['mismatch_abs_mean'], 5)} / {f(r['mismatch_abs_max'], 3)} | "
              f"{r['rc_kl_k3']:.2e} | {f(r['rc_weight_mean'])} / {f(r['rc_weight_max'], 2)} | "
              f"{f(r['rc_truncated_frac'])} | {f(r['rc_rejected_frac'])} | "
              f"{f(r['len_generated'], 1)} / {f(r['len_trained'], 1)} |")
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "rollout_correction.json"), "w") as fh:
        json.dump(rows, fh, indent=1)
    sys.exit(1 if any("error" in r for r in rows) else 0)


if __name__ == "__main__":
    main()

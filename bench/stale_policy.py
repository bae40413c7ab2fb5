#!/usr/bin/python3
"""Staleness without length bias (issue 39 item 3, docs/algorithms.md §14): the length bias and
the throughput of each async_training.stale_policy, in one run of this script.

For each workload, every policy (drop, regenerate, wait) runs with the same fully_async settings
and a bound eta, and the script reports per run: groups generated, trained and dropped as stale;
the mean response length of the groups generated against those dropped and those trained (the
bias: a drop that prefers long responses makes the trained ones shorter); the trainer's waits
(wait only); the largest staleness delivered; and trained tokens per second.

    bench/stale_policy.py [--bin build/asyncrl] [--warm DIR] [--steps 60] [--eta 1]
        [--policies drop regenerate wait] [--workloads model lognormal sim]
        [--runs-dir runs/stale_policy] [--out bench/results] [key=value ...]

Workloads:
  model      configs/demo.yaml as it is (the model's own lengths, partial rollout, s = 0.5)
             with async_training.max_staleness = --eta;
  lognormal  the same with forced long-tailed lengths (workload.lengths=lognormal, median 4,
             sigma 1.5, up to 100 tokens) and one step per 2 prompts: a few responses take
             several versions;
  sim        `asyncrl simulate` of 32 rollout devices on a long-tailed workload (median 256,
             sigma 1, up to 4096 tokens), 40 steps, generation-bound (training at 0.02 ms per
             token: the regime where responses outlive versions): the same scheduling rules
             with modelled costs, deterministic, a few seconds.
--warm: an `asyncrl sft` output (final/) for the real runs; without it they start from a fresh
model (random lengths). Trailing key=value arguments go to every real run. Prints one JSON object
per run as it finishes, then a Markdown table; writes stale_policy.json into --out.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLICIES = ["drop", "regenerate", "wait"]

SIM = ["async_training.mode=fully_async", "async_training.staleness_threshold=0.5",
       "async_training.partial_rollout=true", "async_training.trigger_parameter_sync_step=1",
       "data.train_batch_size=512", "rollout.n=8", "rollout.max_batch=64",
       "rollout.max_new_tokens=4096", "rollout.chunk_tokens=4", "trainer.ppo_mini_batch_size=128",
       "trainer.total_steps=40", "workload.lengths=lognormal", "workload.median=256",
       "workload.sigma=1.0", "workload.min=16", "workload.max=4096", "simulate.devices=64",
       "simulate.rollout_devices=32", "simulate.prompt_tokens=256", "simulate.warmup_steps=4",
       "simulate.decode_base_ms=20", "simulate.decode_per_seq_ms=0.1",
       "simulate.prefill_per_token_ms=0.01", "simulate.train_per_token_ms=0.02",
       "simulate.train_step_ms=500", "simulate.sync_ms=1000", "simulate.reward_ms=100"]


def mean(num, den):
    return num / den if den else None


def real_run(args, workload, policy, extra):
    run_dir = os.path.join(args.runs_dir, f"{workload}_{policy}")
    cmd = [args.bin, "train", "-c", os.path.join(ROOT, "configs/demo.yaml"),
           f"runtime.run_dir={run_dir}", f"trainer.total_steps={args.steps}",
           f"async_training.max_staleness={args.eta}", f"async_training.stale_policy={policy}"]
    if args.warm:
        cmd.append(f"model.path={args.warm}")
    if workload == "lognormal":
        # One step per 2 prompts: steps are short next to a long response, which then spans
        # versions (with the demo's 16 the trainer is the bottleneck and nothing goes stale).
        cmd += ["workload.lengths=lognormal", "workload.median=4", "workload.sigma=1.5",
                "workload.max=100", "rollout.max_new_tokens=100", "trainer.ppo_mini_batch_size=2"]
    cmd += extra
    row = {"workload": workload, "policy": policy, "cmd": " ".join(cmd)}
    t0 = time.time()
    done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                          timeout=args.timeout)
    row["wall_s"] = round(time.time() - t0, 1)
    if done.returncode != 0:
        row["error"] = done.stderr[-1500:]
        return row
    s = json.load(open(os.path.join(run_dir, "summary.json")))
    q = s["queue"]
    n = 8  # rollout.n of configs/demo.yaml
    dropped = q["dropped_stale"]
    row.update(groups_generated=s["groups_generated"], groups_trained=s["groups_trained"],
               dropped_stale=dropped, regenerated=q["regenerated"], stale_waits=q["stale_waits"],
               max_staleness=q["max_delivered_staleness"],
               len_generated=mean(q["received_tokens"], q["received"] * n),
               len_dropped=mean(q["dropped_tokens"], dropped * n),
               len_trained=mean(s["tokens_trained"],
                                sum(json.loads(x).get("samples_trained", 0)
                                    for x in open(os.path.join(run_dir, "metrics.jsonl")))),
               tokens_trained_per_s=mean(s["tokens_trained"], s["train_time_s"]),
               accuracy_final=s.get("final_eval_accuracy"))
    return row


def sim_run(args, policy):
    cmd = [args.bin, "simulate", "-c", os.path.join(ROOT, "configs/demo.yaml")] + SIM + [
        f"async_training.max_staleness={args.eta}", f"async_training.stale_policy={policy}"]
    row = {"workload": "sim", "policy": policy, "cmd": " ".join(cmd)}
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if done.returncode != 0:
        row["error"] = done.stderr[-1500:]
        return row
    r = json.loads(done.stdout.strip().splitlines()[-1])
    row.update(groups_generated=r["groups_generated"], dropped_stale=r["groups_dropped"],
               stale_waits=r["stale_waits"], len_generated=r["len_generated"],
               len_trained=r["len_trained"], tokens_trained_per_s=r["tokens_trained_per_s"],
               trainer_idle_ratio=r["trainer_idle_ratio"])
    return row


def f(x, d=2):
    return "-" if x is None else f"{x:.{d}f}" if isinstance(x, float) else str(x)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=os.path.join(ROOT, "build/asyncrl"))
    p.add_argument("--warm", default="")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--eta", type=int, default=1)
    p.add_argument("--policies", nargs="+", default=POLICIES, choices=POLICIES)
    p.add_argument("--workloads", nargs="+", default=["model", "lognormal", "sim"],
                   choices=["model", "lognormal", "sim"])
    p.add_argument("--runs-dir", default="runs/stale_policy")
    p.add_argument("--out", default="")
    p.add_argument("--timeout", type=int, default=3600)
    args, extra = p.parse_known_args()
    rows = []
    for w in args.workloads:
        for pol in args.policies:
            if w == "sim" and pol == "regenerate":
                continue  # the simulator does not model regeneration (it would show drop's row)
            row = sim_run(args, pol) if w == "sim" else real_run(args, w, pol, extra)
            print(json.dumps(row), flush=True)
            rows.append(row)
    print("\n| workload | policy | generated | dropped | waits | len generated / dropped / trained "
          "| bias | tokens/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        if "error" in r:
            print(f"| {r['workload']} | {r['policy']} | error | | | | | |")
            continue
        g, t = r.get("len_generated"), r.get("len_trained")
        bias = (t / g - 1) if g and t else None
        print(f"| {r['workload']} | {r['policy']} | {r['groups_generated']} | {r['dropped_stale']} | "
              f"{r.get('stale_waits', '-')} | {f(g, 1)} / {f(r.get('len_dropped'), 1)} / {f(t, 1)} | "
              f"{'-' if bias is None else f'{bias:+.1%}'} | {f(r.get('tokens_trained_per_s'), 0)} |")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, "stale_policy.json"), "w") as fh:
            json.dump({"benchmark": "stale_policy", "date": time.strftime("%Y-%m-%d"),
                       "eta": args.eta, "steps": args.steps, "rows": rows}, fh, indent=1)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())

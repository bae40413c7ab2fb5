#!/usr/bin/python3
"""Plots reward against wall time from one or more metrics.jsonl files.

    scripts/plot_metrics.py --out reward.png [--title T] [--smooth N] LABEL=path/metrics.jsonl ...

Uses Debian's python3-matplotlib (hence /usr/bin/python3). Each line of metrics.jsonl is one
optimizer step with at least wall_time_s and reward_mean.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    rows = []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"{path}:{n}: invalid JSON: {e}")
    if not rows:
        sys.exit(f"{path}: no metrics")
    return rows


def smooth(values, n):
    out, acc = [], []
    for v in values:
        acc.append(v)
        if len(acc) > n:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--title", default="reward vs wall time")
    p.add_argument("--smooth", type=int, default=10, help="moving-average window in steps")
    p.add_argument("runs", nargs="+", help="LABEL=path/to/metrics.jsonl")
    a = p.parse_args()
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for run in a.runs:
        label, _, path = run.partition("=")
        if not path:  # no label given: use the path
            label, path = run, run
        rows = load(path)
        t = [r["wall_time_s"] for r in rows]
        ax.plot(t, smooth([r["reward_mean"] for r in rows], a.smooth), label=label)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel(f"reward (mean over {a.smooth} steps)")
    ax.set_title(a.title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(a.out)


if __name__ == "__main__":
    main()

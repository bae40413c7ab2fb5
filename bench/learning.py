#!/usr/bin/python3
"""Time-to-accuracy benchmark: how fast each mode of `asyncrl train` improves the model. Every
mode starts from the same SFT warm start and trains over several seeds, with greedy pass@1 on the
test split evaluated in the run every K steps. It measures the training wall time (wall time
minus the time spent in those evaluations, which pause the trainer) until the greedy accuracy
first reaches a target, by default the warm start's accuracy + 0.10. It also reports the final
accuracy and the sampled reward trend.

    bench/learning.py [--bin build/asyncrl] [--warm DIR] [--sft-args 'k=v ...']
                      [--modes a,b,...] [--seeds 1,2,3] [--eval-every K] [--target ACC]
                      [--out bench/results] [--runs-dir runs/learning] [--resume] [--quick]
                      [key=value ...]

Without --warm it first runs `asyncrl sft --config configs/demo.yaml` once
(runtime.run_dir=<runs-dir>/sft, plus --sft-args) and every run starts from <runs-dir>/sft/final.
Then it runs `asyncrl train --config configs/<mode>.yaml model.path=WARM runtime.seed=S
runtime.run_dir=<runs-dir>/<mode>-s<S> eval.every_steps=K [key=value ...]` for every (seed, mode)
pair. The mode order rotates from seed to seed so that machine noise hits every mode alike.
Trailing key=value arguments go to every train run. --resume reuses a run whose summary.json
says ok and whose command and warm start (sha256 of its files) match this invocation. The default
is to rerun. --quick is a smoke test: seed 1, modes periodic,fully_async_partial,sync,
trainer.total_steps=20, eval.every_steps=10.

Definitions, per run:
  curve           [(0, initial accuracy)] + [(wall_time_s - eval_time_s, eval_accuracy)] for
                  each metrics.jsonl line that has eval_accuracy (eval_time_s is cumulative)
  time to target  x of the first curve point with accuracy >= target; None if none reaches it
  reward trend    mean reward_mean over the first quarter of the steps -> over the last quarter
                  (a quarter is max(1, steps // 4) steps)
  train wall s    the last line's wall_time_s - eval_time_s
Per mode: the mean and minimum of the final accuracy and of the delta over the seeds, "k/n"
seeds that reached the target, the median time to target (None unless all n reached; the median
of the k that did is reported beside it), the mean reward trend, and "learns", which is true when
every seed ran, gained at least 0.10 in greedy accuracy and raised its sampled reward.

Writes <out>/learning.json (everything: definitions, commands, machine, per-run curves),
<out>/learning.md (a per-run table and a per-mode table sorted by median time to target) and
<out>/learning.png (greedy accuracy against training wall time). Prints the per-mode summary as
one JSON object on stdout and progress lines on stderr. Exits 1 if any run failed (failed runs
are recorded and reported in the tables).
"""
import argparse
import hashlib
import json
import math
import os
import shlex
import subprocess
import sys
import time

from stats import median  # bench/stats.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

ALL_MODES = ["sync", "sync_decoupled", "periodic", "stream_off_policy", "fully_async_stale",
             "fully_async_partial", "demo"]
QUICK_MODES = ["periodic", "fully_async_partial", "sync"]
QUICK_OVERRIDES = ["trainer.total_steps=20"]
QUICK_EVAL_EVERY = 10
TARGET_MARGIN = 0.10  # default target: the warm start's greedy accuracy + this
LEARNS_DELTA = 0.10   # "learns": every seed gains at least this much greedy accuracy
EPS = 1e-9            # accuracies are k/N: compare with a tolerance, not bitwise
# Set by the benchmark itself: an override of these keys would break it.
RESERVED_KEYS = {"model.path", "runtime.seed", "runtime.run_dir", "eval.every_steps"}
MARKER = "learning_run.json"  # written into a run dir after the run: its command and warm start


class MetricsError(ValueError):
    """A metrics.jsonl or summary.json that cannot be used; the message names file:line."""


# ---------------------------------------------------------------------------------------------
# Parsing and summarising (pure: no subprocesses; bench/test_learning_summary.py tests these)
# ---------------------------------------------------------------------------------------------

def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def load_metrics(path, eval_every=None):
    """metrics.jsonl -> list of dicts, one per optimizer step. Every line must be a JSON object
    with numeric step, wall_time_s and reward_mean; steps must be consecutive. A line with
    eval_accuracy must also have eval_time_s, which must never decrease. With eval_every=K, every
    step that is a multiple of K, and the last step, must have eval_accuracy. Any violation
    raises MetricsError naming path:line."""
    if not os.path.exists(path):
        raise MetricsError(f"{path}: missing")
    rows, prev_step, prev_eval_time, last_eval_line = [], None, 0.0, None
    with open(path) as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the final newline
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        if not line.strip():
            raise MetricsError(f"{where}: empty line")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise MetricsError(f"{where}: invalid JSON: {e}") from None
        if not isinstance(row, dict):
            raise MetricsError(f"{where}: not a JSON object")
        for key in ("step", "wall_time_s", "reward_mean"):
            if key not in row:
                raise MetricsError(f"{where}: no {key}")
            if not _number(row[key]):
                raise MetricsError(f"{where}: {key} is {row[key]!r}, not a finite number")
        step = row["step"]
        if prev_step is not None and step != prev_step + 1:
            what = "a line is missing" if step > prev_step + 1 else "steps must increase"
            raise MetricsError(f"{where}: step {step} follows step {prev_step} ({what})")
        if eval_every and step > 0 and step % eval_every == 0 and "eval_accuracy" not in row:
            raise MetricsError(f"{where}: step {step} has no eval_accuracy "
                               f"(eval.every_steps={eval_every})")
        if "eval_accuracy" in row:
            if not _number(row["eval_accuracy"]) or not 0 <= row["eval_accuracy"] <= 1:
                raise MetricsError(f"{where}: eval_accuracy is {row['eval_accuracy']!r}")
            if "eval_time_s" not in row:
                raise MetricsError(f"{where}: eval_accuracy without eval_time_s")
            if not _number(row["eval_time_s"]) or row["eval_time_s"] < prev_eval_time - EPS:
                raise MetricsError(f"{where}: eval_time_s is {row['eval_time_s']!r}; it is "
                                   f"cumulative and was {prev_eval_time} before")
            prev_eval_time = row["eval_time_s"]
            last_eval_line = n
        row["_line"] = n
        rows.append(row)
        prev_step = step
    if not rows:
        raise MetricsError(f"{path}: no metrics")
    if eval_every and last_eval_line != len(rows):
        raise MetricsError(f"{path}:{len(rows)}: the last step ({rows[-1]['step']}) has no "
                           f"eval_accuracy")
    return rows


def load_summary(path):
    if not os.path.exists(path):
        raise MetricsError(f"{path}: missing")
    try:
        with open(path) as f:
            s = json.load(f)
    except json.JSONDecodeError as e:
        raise MetricsError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(s, dict):
        raise MetricsError(f"{path}:1: not a JSON object")
    return s


def load_run(run_dir, eval_every=None):
    """Reads RUN/summary.json and RUN/metrics.jsonl. Returns {"ok", "error", "summary", "rows"};
    a failed or unreadable run has ok False and the reason in error (never raises)."""
    out = {"ok": False, "error": "", "summary": None, "rows": None}
    try:
        s = out["summary"] = load_summary(os.path.join(run_dir, "summary.json"))
    except MetricsError as e:
        out["error"] = str(e)
        return out
    if not s.get("ok"):
        out["error"] = s.get("error") or "summary.json: ok is false"
        return out
    if not _number(s.get("initial_eval_accuracy")):
        out["error"] = (f"{os.path.join(run_dir, 'summary.json')}: no initial_eval_accuracy "
                        f"(runtime.eval_before=false?)")
        return out
    try:
        out["rows"] = load_metrics(os.path.join(run_dir, "metrics.jsonl"), eval_every)
    except MetricsError as e:
        out["error"] = str(e)
        return out
    out["ok"] = True
    return out


def eval_curve(rows, initial):
    """[(training wall s, greedy accuracy)]: the start (0, initial), then every in-run eval at
    wall_time_s minus the cumulative eval_time_s (evaluation pauses the trainer)."""
    return [(0.0, initial)] + [(r["wall_time_s"] - r["eval_time_s"], r["eval_accuracy"])
                               for r in rows if "eval_accuracy" in r]


def time_to_target(curve, target):
    """Training wall time of the first curve point with accuracy >= target; None if none."""
    if target is None:
        return None
    for t, acc in curve:
        if acc >= target - EPS:
            return t
    return None


def reward_trend(rows):
    """(mean reward_mean of the first quarter of the steps, of the last quarter); a quarter is
    max(1, len(rows) // 4) steps."""
    q = max(1, len(rows) // 4)
    first, last = rows[:q], rows[-q:]
    return (sum(r["reward_mean"] for r in first) / q, sum(r["reward_mean"] for r in last) / q)


def train_wall_time(rows):
    """Training wall time of the whole run: the last line's wall_time_s minus the evaluation
    time so far (the latest cumulative eval_time_s)."""
    eval_time = 0.0
    for r in rows:
        if "eval_time_s" in r:
            eval_time = r["eval_time_s"]
    return rows[-1]["wall_time_s"] - eval_time


def default_target(runs):
    """(target, initial, spread): the warm start's accuracy + TARGET_MARGIN. The warm start is
    the same for every run, so its greedy accuracy should be too; initial is the mean over the
    runs that loaded and spread is max - min (should be 0)."""
    inits = [r["summary"]["initial_eval_accuracy"] for r in runs if r["ok"]]
    if not inits:
        return None, None, None
    initial = sum(inits) / len(inits)
    return initial + TARGET_MARGIN, initial, max(inits) - min(inits)


def summarize_run(run, target):
    """One run's figures, from load_run's result plus mode and seed (other keys are kept)."""
    out = {k: v for k, v in run.items() if k not in ("summary", "rows")}
    if not run["ok"]:
        out.update(initial_accuracy=None, final_accuracy=None, delta=None, curve=[],
                   time_to_target_s=None, reward_first_quarter=None, reward_last_quarter=None,
                   reward_up=False, train_wall_s=None, steps=None)
        return out
    s, rows = run["summary"], run["rows"]
    initial = s["initial_eval_accuracy"]
    curve = eval_curve(rows, initial)
    final = s.get("final_eval_accuracy")
    if not _number(final):  # runtime.eval_after=false: the last in-run evaluation
        final = curve[-1][1]
    first, last = reward_trend(rows)
    out.update(initial_accuracy=initial, final_accuracy=final, delta=final - initial,
               curve=[list(p) for p in curve], time_to_target_s=time_to_target(curve, target),
               reward_first_quarter=first, reward_last_quarter=last, reward_up=last > first,
               train_wall_s=train_wall_time(rows), steps=len(rows),
               run_wall_time_s=s.get("wall_time_s"))
    return out


def _mean(v):
    return sum(v) / len(v) if v else None


def summarize_mode(mode, runs):
    """Aggregates summarize_run results of one mode over its seeds. A failed run counts as a
    seed that did not reach the target and did not learn."""
    ok = [r for r in runs if r["ok"]]
    n = len(runs)
    times = [r["time_to_target_s"] for r in ok if r["time_to_target_s"] is not None]
    k = len(times)
    return {
        "mode": mode,
        "seeds": [r["seed"] for r in runs],
        "runs_ok": len(ok),
        "failed_seeds": [r["seed"] for r in runs if not r["ok"]],
        "final_accuracy_mean": _mean([r["final_accuracy"] for r in ok]),
        "final_accuracy_min": min((r["final_accuracy"] for r in ok), default=None),
        "delta_mean": _mean([r["delta"] for r in ok]),
        "delta_min": min((r["delta"] for r in ok), default=None),
        "reached": f"{k}/{n}",
        "reached_count": k,
        # None (never / not on every seed) unless every seed reached the target.
        "time_to_target_median_s": median(times) if n and k == n else None,
        "time_to_target_median_of_reached_s": median(times),
        "reward_first_quarter_mean": _mean([r["reward_first_quarter"] for r in ok]),
        "reward_last_quarter_mean": _mean([r["reward_last_quarter"] for r in ok]),
        "train_wall_s_mean": _mean([r["train_wall_s"] for r in ok]),
        "learns": bool(n) and len(ok) == n and all(
            r["delta"] >= LEARNS_DELTA - EPS and r["reward_up"] for r in ok),
    }


def mode_sort_key(m):
    """Every seed reached: by median time (a tie: the higher mean final accuracy first); then by
    how many reached and their median; then modes that never reached, by final accuracy."""
    inf = float("inf")
    if m["time_to_target_median_s"] is not None:
        return (0, m["time_to_target_median_s"], -m["final_accuracy_mean"])
    if m["reached_count"] > 0:
        return (1, -m["reached_count"], m["time_to_target_median_of_reached_s"])
    fa = m["final_accuracy_mean"]
    return (2, -fa if fa is not None else inf, 0.0)


def summarize_all(runs, modes, target=None):
    """runs: load_run results with "mode" and "seed" added. target None: default_target.
    Returns {"target", "target_source", "initial_accuracy", "initial_accuracy_spread", "runs",
    "modes" (sorted by mode_sort_key), "first_to_target", "failed_runs"}."""
    dt, initial, spread = default_target(runs)
    source = "--target" if target is not None else f"initial accuracy + {TARGET_MARGIN}"
    if target is None:
        target = dt
    per_run = [summarize_run(r, target) for r in runs]
    per_mode = [summarize_mode(m, [r for r in per_run if r["mode"] == m]) for m in modes]
    per_mode.sort(key=mode_sort_key)
    best = per_mode[0]["time_to_target_median_s"] if per_mode else None
    # Time to target is only as fine as the eval interval: modes with the same median tie.
    tied = [m["mode"] for m in per_mode if best is not None and
            m["time_to_target_median_s"] is not None and m["time_to_target_median_s"] <= best + EPS]
    return {"target": target, "target_source": source, "initial_accuracy": initial,
            "initial_accuracy_spread": spread, "runs": per_run,
            "modes": {m["mode"]: m for m in per_mode}, "first_to_target": tied[0] if tied else None,
            "first_to_target_tied": tied, "failed_runs": sum(not r["ok"] for r in per_run)}


def mean_curve(curves):
    """The per-mode mean line: point i is (mean x, mean accuracy) over the seeds' i-th points,
    up to the shortest curve (the eval steps are the same for every seed)."""
    curves = [c for c in curves if c]
    if not curves:
        return []
    n = min(len(c) for c in curves)
    return [(sum(c[i][0] for c in curves) / len(curves), sum(c[i][1] for c in curves) / len(curves))
            for i in range(n)]


# ---------------------------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------------------------

def _f(x, nd=3):
    return "—" if x is None else f"{x:.{nd}f}"


def _t(x):
    return "never" if x is None else f"{x:.1f}"


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def conclusion(res):
    modes, target = list(res["modes"].values()), res["target"]
    if target is None:
        return "No run finished, so there is no target and no result."
    tied = res.get("first_to_target_tied") or []
    if len(tied) > 1:
        m = res["modes"][tied[0]]
        names = ", ".join(f"**{t}**" for t in tied)
        return (f"{names} reach the target accuracy {target:.3f} first, tied at a median of "
                f"{m['time_to_target_median_s']:.1f} s of training wall time on every seed (time to "
                f"target is only as fine as the eval interval; listed by mean final accuracy, highest "
                f"first).")
    if res["first_to_target"]:
        m = res["modes"][res["first_to_target"]]
        return (f"**{m['mode']}** reaches the target accuracy {target:.3f} first: median "
                f"{m['time_to_target_median_s']:.1f} s of training wall time over "
                f"{m['reached']} seeds.")
    some = [m for m in modes if m["reached_count"] > 0]
    if some:
        m = some[0]
        return (f"No mode reached the target accuracy {target:.3f} on every seed; the best is "
                f"**{m['mode']}** ({m['reached']} seeds reached it, median of those "
                f"{m['time_to_target_median_of_reached_s']:.1f} s of training wall time).")
    return f"No run reached the target accuracy {target:.3f}."


def markdown(res, meta):
    init = res["initial_accuracy"]
    lines = [
        "# Time to accuracy",
        "",
        f"Warm start: `{meta['warm']}`, greedy pass@1 {_f(init)} on the test split "
        f"(spread over runs {_f(res['initial_accuracy_spread'])}). Target {_f(res['target'])} "
        f"({res['target_source']}). Greedy accuracy evaluated every {meta['eval_every']} steps; "
        f"times are training wall time (wall time minus the time in those evaluations). "
        f"Seeds {', '.join(map(str, meta['seeds']))}; machine {meta['machine']['cpu']}, "
        f"{meta['machine']['nproc']} cores. Overrides: "
        f"{' '.join(meta['overrides']) or 'none'}.",
        "",
        "## Runs",
        "",
    ]
    rows, errors = [], []
    for mode in meta["modes"]:
        for r in sorted((r for r in res["runs"] if r["mode"] == mode), key=lambda r: r["seed"]):
            if not r["ok"]:
                rows.append([mode, r["seed"], "—", "failed", "—", "—", "—", "—"])
                errors.append(f"- {mode} seed {r['seed']}: {r['error']}")
                continue
            rows.append([mode, r["seed"], _f(r["initial_accuracy"]), _f(r["final_accuracy"]),
                         f"{r['delta']:+.3f}",
                         f"{r['reward_first_quarter']:.3f} → {r['reward_last_quarter']:.3f}",
                         _t(r["time_to_target_s"]), f"{r['train_wall_s']:.1f}"])
    lines.append(table(["mode", "seed", "before", "after", "delta",
                        "reward first→last quarter", "time to target s", "train wall s"], rows))
    if errors:
        lines += ["", "Failed runs:", ""] + errors
    lines += ["", "## Modes (sorted by median time to target)", ""]
    rows = []
    for m in res["modes"].values():
        if m["time_to_target_median_s"] is not None:
            ttt = f"{m['time_to_target_median_s']:.1f}"
        elif m["reached_count"]:
            ttt = f"∞ ({m['reached']} reached, median of those " \
                  f"{m['time_to_target_median_of_reached_s']:.1f})"
        else:
            ttt = "∞"
        rows.append([m["mode"], f"{m['runs_ok']}/{len(m['seeds'])}",
                     f"{_f(m['final_accuracy_mean'])} ({_f(m['final_accuracy_min'])})",
                     f"{_f(m['delta_mean'])} ({_f(m['delta_min'])})", m["reached"], ttt,
                     f"{_f(m['reward_first_quarter_mean'])} → {_f(m['reward_last_quarter_mean'])}",
                     _f(m["train_wall_s_mean"], 1), "yes" if m["learns"] else "no"])
    lines.append(table(["mode", "runs ok", "final acc mean (min)", "delta mean (min)",
                        "reached target", "median time to target s", "reward first→last quarter",
                        "train wall s (mean)", "learns"], rows))
    lines += ["", conclusion(res), "",
              f"\"learns\": every seed ran, gained at least {LEARNS_DELTA:.2f} greedy accuracy and "
              "raised its mean sampled reward from the first to the last quarter of the steps.", ""]
    return "\n".join(lines)


def plot(res, modes, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    colours = plt.get_cmap("tab10").colors
    for i, mode in enumerate(modes):
        c = colours[i % len(colours)]
        curves = [r["curve"] for r in res["runs"] if r["mode"] == mode and r["ok"]]
        for cur in curves:
            ax.plot([p[0] for p in cur], [p[1] for p in cur], color=c, lw=0.8, alpha=0.35)
        mc = mean_curve(curves)
        if mc:
            ax.plot([p[0] for p in mc], [p[1] for p in mc], color=c, lw=2.5,
                    label=f"{mode} (mean of {len(curves)})")
    if res["target"] is not None:
        ax.axhline(res["target"], color="k", ls="--", lw=1, label=f"target {res['target']:.3f}")
    ax.set_xlabel("training wall time (s, evaluation excluded)")
    ax.set_ylabel("greedy accuracy (pass@1, test split)")
    ax.set_title("time to accuracy: every mode from the same warm start (thin: seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Running
# ---------------------------------------------------------------------------------------------

def machine():
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count()
    return {"arch": os.uname().machine, "cpu": cpu, "nproc": nproc}


def dir_sha256(path):
    """sha256 over the relative names and contents of every file under path (the warm start's
    identity: a rerun sft at the same path is a different warm start)."""
    h = hashlib.sha256()
    for dirpath, dirnames, files in os.walk(path):
        dirnames.sort()
        for name in sorted(files):
            p = os.path.join(dirpath, name)
            h.update(os.path.relpath(p, path).encode() + b"\0")
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


def read_marker(run_dir):
    try:
        with open(os.path.join(run_dir, MARKER)) as f:
            return json.load(f)
    except (OSError, json.JSONDecodeError):
        return None


def execute(cmd, run_dir, marker):
    """Runs cmd with stdout/stderr to run_dir/asyncrl.{out,err}; writes the marker on exit 0.
    Returns (return code, seconds)."""
    os.makedirs(run_dir, exist_ok=True)
    for name in ("summary.json", "metrics.jsonl", "sft_summary.json", MARKER):
        p = os.path.join(run_dir, name)
        if os.path.exists(p):
            os.remove(p)  # never read a previous run's files as this one's
    t0 = time.monotonic()
    with open(os.path.join(run_dir, "asyncrl.out"), "w") as out, \
            open(os.path.join(run_dir, "asyncrl.err"), "w") as err:
        try:
            rc = subprocess.run(cmd, stdout=out, stderr=err).returncode
        except OSError as e:
            err.write(f"{cmd[0]}: {e}\n")
            rc = 127
    if rc == 0:
        with open(os.path.join(run_dir, MARKER), "w") as f:
            json.dump(marker, f, indent=2)
    return rc, time.monotonic() - t0


def stderr_tail(run_dir, n=3):
    try:
        with open(os.path.join(run_dir, "asyncrl.err")) as f:
            lines = [line.rstrip() for line in f if line.strip()]
        return " | ".join(lines[-n:])
    except OSError:
        return ""


def log(msg):
    print(f"[learning] {msg}", file=sys.stderr, flush=True)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "asyncrl"))
    ap.add_argument("--warm", default="", help="warm-start model dir (default: run sft first)")
    ap.add_argument("--sft-args", default="", help="extra key=value overrides for the sft run")
    ap.add_argument("--modes", default=None, help=f"comma-separated (default: {','.join(ALL_MODES)})")
    ap.add_argument("--seeds", default=None, help="comma-separated runtime.seed values (default 1,2,3)")
    ap.add_argument("--eval-every", type=int, default=None, help="eval.every_steps (default 10)")
    ap.add_argument("--target", type=float, default=None,
                    help=f"absolute target accuracy (default: warm start + {TARGET_MARGIN})")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--runs-dir", default=os.path.join(ROOT, "runs", "learning"))
    ap.add_argument("--resume", action="store_true",
                    help="reuse finished runs (summary ok, same command and warm start)")
    ap.add_argument("--quick", action="store_true",
                    help="smoke test: seed 1, modes periodic,fully_async_partial,sync, 20 steps")
    ap.add_argument("overrides", nargs="*", help="key=value passed to every train run")
    a = ap.parse_args(argv)
    a.modes = a.modes.split(",") if a.modes else (QUICK_MODES if a.quick else ALL_MODES)
    a.modes = [m.strip() for m in a.modes if m.strip()]
    try:
        a.seeds = [int(s) for s in a.seeds.split(",") if s.strip()] if a.seeds else \
            ([1] if a.quick else [1, 2, 3])
    except ValueError:
        ap.error(f"--seeds: integers expected, got {a.seeds!r}")
    if a.quick:
        if a.eval_every not in (None, QUICK_EVAL_EVERY):
            ap.error(f"--quick uses --eval-every {QUICK_EVAL_EVERY}")
        a.eval_every = QUICK_EVAL_EVERY
        a.overrides = QUICK_OVERRIDES + a.overrides
    elif a.eval_every is None:
        a.eval_every = 10
    if a.eval_every < 1:
        ap.error("--eval-every must be >= 1")
    if not a.modes or not a.seeds:
        ap.error("no modes or no seeds")
    if len(set(a.modes)) != len(a.modes) or len(set(a.seeds)) != len(a.seeds):
        ap.error("--modes and --seeds must not repeat")
    for m in a.modes:
        if not os.path.exists(os.path.join(ROOT, "configs", f"{m}.yaml")):
            ap.error(f"unknown mode {m}: no configs/{m}.yaml")
    a.sft_args = shlex.split(a.sft_args)
    for kv in a.overrides + a.sft_args:
        key, eq, _ = kv.partition("=")
        if not eq or not key:
            ap.error(f"{kv!r}: key=value expected")
    for kv in a.overrides:
        if kv.partition("=")[0] in RESERVED_KEYS:
            ap.error(f"{kv}: set by the benchmark ({', '.join(sorted(RESERVED_KEYS))}); "
                     f"use --warm / --seeds / --runs-dir / --eval-every")
    a.bin, a.out, a.runs_dir = (os.path.abspath(p) for p in (a.bin, a.out, a.runs_dir))
    a.warm = os.path.abspath(a.warm) if a.warm else ""
    return a


def main(argv=None):
    a = parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.runs_dir, exist_ok=True)
    commands = []

    # The warm start: one sft run, shared by every mode and seed.
    sft_cmd = None
    if a.warm:
        warm = a.warm
        if not os.path.isdir(warm):
            sys.exit(f"--warm {warm}: not a directory")
    else:
        sft_dir = os.path.join(a.runs_dir, "sft")
        warm = os.path.join(sft_dir, "final")
        sft_cmd = [a.bin, "sft", "--config", os.path.join(ROOT, "configs", "demo.yaml"),
                   f"runtime.run_dir={sft_dir}"] + a.sft_args
        marker = read_marker(sft_dir)
        if a.resume and marker and marker.get("command") == sft_cmd and os.path.isdir(warm):
            log(f"sft: reusing {warm}")
            commands.append({"command": sft_cmd, "reused": True})
        else:
            log(f"sft: {' '.join(shlex.quote(c) for c in sft_cmd)}")
            rc, secs = execute(sft_cmd, sft_dir, {"command": sft_cmd})
            commands.append({"command": sft_cmd, "reused": False, "returncode": rc,
                             "seconds": secs})
            if rc != 0 or not os.path.isdir(warm):
                sys.exit(f"sft failed ({rc}), see {sft_dir}/asyncrl.err: {stderr_tail(sft_dir)}")
            log(f"sft: done in {secs:.1f} s")
    warm_sha = dir_sha256(warm)

    # Every (seed, mode) pair; the mode order rotates from seed to seed.
    plan = []
    for i, seed in enumerate(a.seeds):
        k = i % len(a.modes)
        plan += [(seed, m) for m in a.modes[k:] + a.modes[:k]]
    runs, target_now = [], a.target
    for n, (seed, mode) in enumerate(plan, 1):
        run_dir = os.path.join(a.runs_dir, f"{mode}-s{seed}")
        cmd = [a.bin, "train", "--config", os.path.join(ROOT, "configs", f"{mode}.yaml"),
               f"model.path={warm}", f"runtime.seed={seed}", f"runtime.run_dir={run_dir}",
               f"eval.every_steps={a.eval_every}", "runtime.eval_before=true",
               "runtime.eval_after=true"] + a.overrides
        marker = {"command": cmd, "warm_sha256": warm_sha}
        head = f"{n}/{len(plan)} {mode} seed {seed}"
        prev = load_run(run_dir, a.eval_every) if a.resume and read_marker(run_dir) == marker \
            else None
        if prev and prev["ok"]:
            rec = {"command": cmd, "reused": True}
            rc, secs = 0, None
        else:
            rc, secs = execute(cmd, run_dir, marker)
            rec = {"command": cmd, "reused": False, "returncode": rc, "seconds": secs}
        commands.append(rec)
        r = load_run(run_dir, a.eval_every)
        if rc != 0:
            why = r["error"] or stderr_tail(run_dir) or "no error message"
            r.update(ok=False, error=f"exit code {rc}: {why}")
        r.update(mode=mode, seed=seed, run_dir=run_dir, command=cmd, returncode=rc,
                 reused=rec["reused"], process_wall_s=secs)
        runs.append(r)
        if not r["ok"]:
            log(f"{head}: FAILED: {r['error']}")
            continue
        if target_now is None:  # the warm start's accuracy is known from the first run
            target_now = r["summary"]["initial_eval_accuracy"] + TARGET_MARGIN
        s = summarize_run(r, target_now)
        ttt = s["time_to_target_s"]
        log(f"{head}: {s['initial_accuracy']:.3f} -> {s['final_accuracy']:.3f} "
            f"({s['delta']:+.3f}), train {s['train_wall_s']:.1f} s, "
            f"{'reused' if rec['reused'] else f'wall {secs:.1f} s'}, target {target_now:.3f} "
            f"{'never reached' if ttt is None else f'at {ttt:.1f} s'}")

    res = summarize_all(runs, a.modes, a.target)
    if res["initial_accuracy_spread"] and res["initial_accuracy_spread"] > EPS:
        log(f"warning: the warm start's greedy accuracy differs between runs by "
            f"{res['initial_accuracy_spread']:.4f}; the target uses the mean")
    meta = {"warm": warm, "warm_sha256": warm_sha, "eval_every": a.eval_every, "seeds": a.seeds,
            "modes": a.modes, "overrides": a.overrides, "machine": machine()}
    out = {"benchmark": "learning", **meta, "bin": a.bin, "sft_args": a.sft_args, "quick": a.quick,
           "definitions": __doc__[__doc__.index("Definitions"):__doc__.index("Writes <out>")].strip(),
           "commands": commands, **res, "conclusion": conclusion(res)}
    with open(os.path.join(a.out, "learning.json"), "w") as f:
        json.dump(out, f, indent=2)
    with open(os.path.join(a.out, "learning.md"), "w", encoding="utf-8") as f:
        f.write(markdown(res, meta))
    plot(res, a.modes, os.path.join(a.out, "learning.png"))
    log(conclusion(res).replace("**", ""))
    log(f"wrote {a.out}/learning.{{json,md,png}}")
    print(json.dumps({"target": res["target"], "initial_accuracy": res["initial_accuracy"],
                      "first_to_target": res["first_to_target"],
                      "first_to_target_tied": res["first_to_target_tied"],
                      "failed_runs": res["failed_runs"],
                      "modes": res["modes"]}, indent=2))
    return 1 if res["failed_runs"] else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""End-to-end benchmark: every mode of `asyncrl train` side by side, on the same model, task,
seed and cores, on a balanced and a long-tail workload; repetitions interleave the modes so that
machine noise hits them alike. For each run the simulator (`asyncrl simulate`) predicts the step
time, which validates it (see "Simulator validation" below).

    bench/e2e.py --model DIR [--out bench/results] [--bin build/asyncrl] [--steps 20] [--reps 2]
                 [--modes a,b] [--workloads a,b] [--no-a3po] [--no-startup] [--quick]
                 [--set KEY=VALUE ...] [--contention FILE]

Writes e2e.json (per workload and mode: step time, tokens trained per second per core, idle
ratios, phase times, contention, simulated step time; `speedup` over colocated sync; the targets
with their bounds; the top-level keys "speedup.periodic_vs_sync_decoupled",
"speedup.fully_async_partial_vs_sync", "bound.periodic", "bound.fully_async_partial" (the bounds
from bench_contention's factors; null when it did not run) and "bound_self.<mode>"; `startup`:
periodic on the balanced workload with eager micro-batches against the trainer waiting for full
ones, same repetitions), simulator_validation.json,
e2e_reward.png (reward vs wall time, every mode, balanced workload), e2e_step_time.png, and
a3po_e2e.json (fully async step time with loglinear vs recompute prox).

Phase times and contention (per run, steps after the warm-up, from metrics.jsonl):
  T_train  = step_time_s * (1 - trainer_idle_ratio)      trainer busy per step
  T_gen    = step_time_s * (1 - rollouter_idle_ratio)    rollout worker busy per step
The overlap bounds use the medians over steps of sync_decoupled's T_gen and T_train (there the
phases alternate, each alone on its core) and contention factors c_gen, c_train (time together /
time alone):
  bound(periodic vs sync_decoupled)           = (T_gen + T_train) / max(c_gen T_gen, c_train T_train)
  bound(fully_async_partial vs colocated sync) = step_s(sync) / max(c_gen T_gen, c_train T_train)
  ceiling: the same with c_gen = c_train = 1 (overlap hides the shorter phase completely)
Two bounds are reported, with two sources of c_gen, c_train:
  bound       c from bench_contention (contention.json of the same suite run, its mode matching
              the runs' runtime.affinity): measured apart from the run it judges. The targets'
              "share of the bound" uses this one; without contention.json it is null and the
              reason is given (no fallback to the other).
  bound_self  c of the overlapped run itself (step 4 below). A slow overlapped run raises its
              own c and so lowers its own bar: it is reported, never judged against.

Simulator validation: each run is simulated with its own measured costs, so that machine drift
cancels (the costs are measured in the same minute as the run they predict):
  1. base costs from calibration.json (bench_calibrate: the shape of the decode cost in the batch
     size, prefill, training per token, optimizer step, weight load); the response lengths the run
     generated (balanced: each step's mean length, tokens_generated / samples, once per sample in
     step order, replayed by the simulator; long_tail: the same forced lengths function in both);
  2. pass 0: simulate with the base costs, no contention -> simulated busy time of the trainer
     and of the rollout devices, and the part of each that overlapped the other phase;
  3. uncontended scale k = measured busy / simulated busy of the same workload and repetition's
     sync_decoupled run (no overlap there), for generation and training separately; colocated
     sync (two workers, then a 2-thread trainer) takes k from its own run;
  4. contention: rho = (measured busy / pass-0 busy) / k for this run, and with f = the pass-0
     share of that phase's busy time that overlapped the other phase,
     c = 1 + (rho - 1) / f (c = 1 when f < 0.05; never below 1);
  5. the prediction: simulate with the base costs times k and contention c_gen, c_train.
The simulator thus predicts the scheduling (idle time, overlap, syncs, staleness) from measured
per-token costs; it does not predict the costs themselves.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from stats import median  # bench/stats.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every mode runs the same lean trainer (no extra old/reference forward: behaviour log-probs
# come from the rollout) and fills micro-batches across groups, so modes differ only in
# scheduling.
COMMON = [
    "runtime.eval_before=false", "runtime.eval_after=false", "runtime.log_level=warn",
    "trainer.group_aligned_micro_batches=false", "algorithm.use_rollout_logprobs=true",
    "trainer.compute_ref=false",
]

MODES = {
    # Colocated: each phase uses both cores (two 1-thread rollout workers, then a 2-thread
    # trainer). On this machine a decode step gains nothing from a second OpenMP thread, so
    # two workers are the strongest colocated baseline.
    "sync": ("sync.yaml", ["rollout.num_workers=2"]),
    "sync_decoupled": ("sync_decoupled.yaml", []),
    "periodic": ("periodic.yaml", []),
    "fully_async_stale": ("fully_async_stale.yaml", []),
    "fully_async_partial": ("fully_async_partial.yaml", []),
}
WORKERS = {"sync": 2}  # rollout workers per mode (default 1)

WORKLOADS = {
    # Generation ~ training on one core each: the model's own (EOS-decided) lengths, mean about
    # 33 tokens, with 24 KV-cache slots (3 groups in flight).
    "balanced": ["workload.lengths=model", "rollout.max_batch=24"],
    # Long tail: forced lognormal lengths, median 16, sigma 1, up to 112 tokens.
    "long_tail": ["workload.lengths=lognormal", "workload.median=16", "workload.sigma=1.0",
                  "workload.min=4", "workload.max=112", "rollout.max_new_tokens=112",
                  "rollout.max_batch=64"],
}

# Issue 15 targets on step time. "frac_of_bound": the speed-up must also reach this share of the
# ideal overlap bound.
SPEED_TARGETS = [
    {"key": "periodic_vs_sync_decoupled", "mode": "periodic", "base": "sync_decoupled",
     "workload": "balanced", "target": 1.6, "frac_of_bound": 0.9},
    {"key": "fully_async_partial_vs_sync", "mode": "fully_async_partial", "base": "sync",
     "workload": "long_tail", "target": 2.0, "frac_of_bound": None},
]
WARMUP = 3
SIM_ERROR_OK = 0.15


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit(f"failed ({p.returncode}): {' '.join(cmd)}\n{p.stderr[-3000:]}")
    return p.stdout


def metrics(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def warmup(rows):
    return min(WARMUP, len(rows) - 1)


def phase_times(rows, workers):
    """Per step after the warm-up: trainer busy s, rollout busy s (per worker)."""
    w = warmup(rows)
    t_train = [r["step_time_s"] * (1 - r["trainer_idle_ratio"]) for r in rows[w:]]
    t_gen = [r["step_time_s"] * (1 - r["rollouter_idle_ratio"]) for r in rows[w:]]
    return median(t_gen), median(t_train)


def busy_totals(rows, workers):
    """Whole run (as the simulator counts it): trainer busy s, rollout busy s over all workers."""
    train = sum(r["step_time_s"] * (1 - r["trainer_idle_ratio"]) for r in rows)
    gen = sum(r["step_time_s"] * (1 - r["rollouter_idle_ratio"]) for r in rows) * workers
    return gen, train


def summarize_run(rows, cores, workers):
    w = warmup(rows)
    span = rows[-1]["wall_time_s"] - rows[w - 1]["wall_time_s"] if w > 0 else rows[-1]["wall_time_s"]
    steps = len(rows) - w
    tokens = sum(r["tokens_trained"] for r in rows[w:])
    mean = lambda k: sum(r[k] for r in rows[w:]) / steps  # noqa: E731
    samples = sum(r["samples"] for r in rows)
    t_gen, t_train = phase_times(rows, workers)
    s = {
        "step_s": span / steps,
        "tpspd": tokens / span / cores,
        "trainer_idle_ratio": mean("trainer_idle_ratio"),
        "rollouter_idle_ratio": mean("rollouter_idle_ratio"),
        "stale_samples": sum(r["stale_samples"] for r in rows),
        "staleness_max": max(r["staleness_max"] for r in rows),
        "partial_ratio": mean("partial_ratio"),
        "mean_response_tokens": sum(r["tokens_trained"] for r in rows) / max(1, samples),
        "t_gen_s": t_gen,
        "t_train_s": t_train,
    }
    # Per-step fields, medians over steps after the warm-up (steps without the field left out):
    # start-up latency (the step's first group at the trainer, its first forward/backward),
    # micro-batches per step, and the CPU share outside compute regions.
    for k in ("first_group_s", "first_train_s", "micro_batches", "overhead_cpu_share"):
        s[k] = median([r[k] for r in rows[w:] if r.get(k) is not None])
    # The tail: training left after the step's last group.
    s["tail_s"] = median([r["step_time_s"] - r["last_group_s"] for r in rows[w:]
                          if r.get("last_group_s") is not None])
    # Trainer padding: processed (padded) over real (non-padding) tokens, whole run.
    real = sum(r.get("tokens_real") or 0 for r in rows)
    if real > 0 and all("tokens_real" in r for r in rows):
        s["processed_to_real_tokens"] = sum(r["tokens_processed"] for r in rows) / real
    else:
        s["processed_to_real_tokens"] = None
    return s


def response_lengths(rows):
    """The lengths the run generated, as far as metrics.jsonl tells: each step's mean length
    (tokens_generated / samples), once per sample, in step order."""
    out = []
    for r in rows:
        n = r.get("samples") or 0
        if n > 0 and r.get("tokens_generated"):
            out += [max(1, round(r["tokens_generated"] / n))] * n
    return out


class RunSimulator:
    """Simulates one run with its own measured costs (module docstring, steps 1-5)."""

    def __init__(self, bin_, steps, cores, calibration, tmp):
        self.bin, self.steps, self.cores, self.tmp = bin_, steps, cores, tmp
        with open(calibration) as f:
            self.base = json.load(f)
        self.calls = 0
        self.sd_scales = {}  # (workload, id(sd_rows)) -> sync_decoupled's scales (same every mode)

    def simulate(self, workload, mode, rows, k_gen=1.0, k_train=1.0, c_gen=1.0, c_train=1.0):
        cal = dict(self.base)
        for key in ("decode_base_ms", "decode_per_seq_ms", "prefill_per_token_ms"):
            cal[key] = self.base[key] * k_gen
        for key in ("train_per_token_ms", "train_step_ms"):
            cal[key] = self.base[key] * k_train
        cal["gen_contention"], cal["train_contention"] = c_gen, c_train
        if workload == "balanced":
            cal["response_lengths"] = response_lengths(rows)
        self.calls += 1
        path = os.path.join(self.tmp, f"sim-cal-{self.calls}.json")
        with open(path, "w") as f:
            json.dump(cal, f)
        cfg, mode_extra = MODES[mode]
        over = [f"trainer.total_steps={len(rows)}", f"simulate.warmup_steps={warmup(rows)}",
                f"simulate.calibration={path}", f"simulate.devices={self.cores}"]
        return json.loads(run([self.bin, "simulate", "-c", os.path.join(ROOT, "configs", cfg)] + COMMON +
                              WORKLOADS[workload] + mode_extra + over))

    def scales(self, workload, mode, rows):
        """k_gen, k_train: measured over pass-0 simulated busy time; and the pass-0 result."""
        s0 = self.simulate(workload, mode, rows)
        gen, train = busy_totals(rows, WORKERS.get(mode, 1))
        return gen / s0["rollout_busy_s"], train / s0["trainer_busy_s"], s0

    def predict(self, workload, mode, rows, sd_rows):
        k_gen, k_train, s0 = self.scales(workload, mode, rows)
        c_gen = c_train = 1.0
        if mode != "sync":
            if mode != "sync_decoupled":
                key = (workload, id(sd_rows))
                if key not in self.sd_scales:
                    self.sd_scales[key] = self.scales(workload, "sync_decoupled", sd_rows)
                kd_gen, kd_train, _ = self.sd_scales[key]

                def contention(rho, overlap, busy):
                    f = overlap / busy if busy > 0 else 0.0
                    return max(1.0, 1.0 + (rho - 1.0) / f) if f >= 0.05 else 1.0
                c_gen = contention(k_gen / kd_gen, s0["rollout_overlap_s"], s0["rollout_busy_s"])
                c_train = contention(k_train / kd_train, s0["trainer_overlap_s"], s0["trainer_busy_s"])
                k_gen, k_train = kd_gen, kd_train
        sim = self.simulate(workload, mode, rows, k_gen, k_train, c_gen, c_train)
        return sim, {"k_gen": k_gen, "k_train": k_train, "c_gen": c_gen, "c_train": c_train}


def load_optional(path):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


# bench_contention's result counts as this suite run's when it was written at most this long
# before the first e2e run ended (scripts/bench.sh runs it just before e2e.py).
CONTENTION_MAX_AGE_S = 3600


def affinity_of(overrides):
    """The runtime.affinity the runs used: the last --set runtime.affinity=X, else the default
    (runtime/config/sections.hpp: none)."""
    val = "none"
    for o in overrides:
        k, _, v = o.partition("=")
        if k.strip() == "runtime.affinity":
            val = v.strip()
    return val


def independent_contention(cb, affinity, path="contention.json", age_s=None):
    """c_gen, c_train for the bounds, from bench_contention's result `cb` (contention.json):
    its mode named like the runs' runtime.affinity. Returns {"c_gen", "c_train", "source"}, or
    {"missing": why} when there is none to use; never a substitute. age_s: how long before the
    e2e runs the file was written (None: not checked)."""
    if cb is None:
        return {"missing": f"{path} absent: bench_contention did not run in this suite (not built?)"}
    if age_s is not None and not 0 <= age_s <= CONTENTION_MAX_AGE_S:
        when = f"{age_s / 3600:.1f} h before" if age_s > 0 else f"{-age_s:.0f} s after"
        return {"missing": f"{path} was written {when} the e2e runs: not from this suite run"}
    m = (cb.get("modes") or {}).get(affinity)
    if not m or m.get("contention_gen") is None or m.get("contention_train") is None:
        return {"missing": f"{path} has no mode '{affinity}' (the runs' runtime.affinity)"}
    return {"c_gen": m["contention_gen"], "c_train": m["contention_train"],
            "source": f"bench_contention, mode {affinity}"}


def overlap_bound(base_step, t_gen, t_train, c_gen=1.0, c_train=1.0):
    """The fastest an overlapped step can be is max(c_gen T_gen, c_train T_train): each phase
    alone on its core, slowed by the other. The bound is the base step over that."""
    return base_step / max(c_gen * t_gen, c_train * t_train)


def overlap_note(t):
    """One line: the phase balance of the baseline and what overlap can gain at most from it."""
    tg, tt = t["T_gen_s"], t["T_train_s"]
    if tt > tg:
        bal, short, long_ = f"training is {tt / tg:.2f}x as long as generation", "generation", "T_train"
    elif tg > tt:
        bal, short, long_ = f"generation is {tg / tt:.2f}x as long as training", "training", "T_gen"
    else:
        bal, short, long_ = "the phases are equally long", "either phase", "T_train"
    base = (f"T_gen + T_train = {tg + tt:.3f} s" if t["base"] == "sync_decoupled"
            else f"{t['base_step_s']:.3f} s/step")
    out = (f"{t['mode']} / {t['base']}, {t['workload']}: T_gen {tg:.3f} s, T_train {tt:.3f} s; "
           f"{bal}, so overlap can at best hide {short} and an overlapped step takes at least "
           f"{long_} ({max(tg, tt):.3f} s): at most {t['ceiling']:.2f}x over {t['base']} "
           f"({base}) without contention")
    if t.get("bound") is not None:
        out += f", {t['bound']:.2f}x with bench_contention's factors"
    return out + "."


def speed_targets(result, contention):
    """The issue-15 targets with their bounds. contention: independent_contention()'s answer."""
    out = {}
    for t in SPEED_TARGETS:
        wl = result["workloads"].get(t["workload"])
        if not wl or t["mode"] not in wl["modes"] or t["base"] not in wl["modes"] or \
                "sync_decoupled" not in wl["modes"]:
            continue
        m, sd = wl["modes"][t["mode"]], wl["modes"]["sync_decoupled"]
        speedup = wl["modes"][t["base"]]["step_s"] / m["step_s"]
        tg, tt = sd["t_gen_s"], sd["t_train_s"]
        if t["base"] == "sync_decoupled":
            base = tg + tt
            how = "(T_gen + T_train) / max(c_gen T_gen, c_train T_train)"
        else:
            base = wl["modes"][t["base"]]["step_s"]
            how = f"step_s({t['base']}) / max(c_gen T_gen, c_train T_train)"
        e = {"mode": t["mode"], "base": t["base"], "workload": t["workload"],
             "target": t["target"], "frac_of_bound": t["frac_of_bound"], "measured": speedup,
             "bound_formula": how, "base_step_s": base, "T_gen_s": tg, "T_train_s": tt,
             "T_train_over_T_gen": tt / tg}
        e["ceiling"] = overlap_bound(base, tg, tt)
        e["share_of_ceiling"] = speedup / e["ceiling"]
        e["c_gen_self"], e["c_train_self"] = m["c_gen"], m["c_train"]
        e["bound_self"] = overlap_bound(base, tg, tt, m["c_gen"], m["c_train"])
        e["share_of_bound_self"] = speedup / e["bound_self"]
        if "missing" in contention:
            e.update(bound=None, share_of_bound=None, c_gen=None, c_train=None,
                     contention_missing=contention["missing"])
        else:
            e.update(c_gen=contention["c_gen"], c_train=contention["c_train"],
                     contention_source=contention["source"])
            e["bound"] = overlap_bound(base, tg, tt, e["c_gen"], e["c_train"])
            e["share_of_bound"] = speedup / e["bound"]
        # met: True / False, or None when the share of the bound decides and there is no bound.
        met = speedup >= t["target"]
        if t["frac_of_bound"] and met:
            met = None if e["bound"] is None else speedup >= t["frac_of_bound"] * e["bound"]
        e["met"] = met
        e["overlap_note"] = overlap_note(e)
        out[t["key"]] = e
    return out


def contention_age_s(path, runs):
    """Seconds from contention.json's write to the end of the first e2e run (None: no file)."""
    if not os.path.exists(path):
        return None
    ends = [os.path.getmtime(os.path.join(d, "metrics.jsonl")) for d in runs
            if os.path.exists(os.path.join(d, "metrics.jsonl"))]
    return (min(ends) if ends else os.path.getmtime(path)) - os.path.getmtime(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="warm-started model directory")
    ap.add_argument("--out", default=os.path.join(ROOT, "bench", "results"))
    ap.add_argument("--bin", default=os.path.join(ROOT, "build", "asyncrl"))
    ap.add_argument("--sim-bin", default="", help="the asyncrl that simulates (default: --bin)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--modes", default=",".join(MODES), help="comma-separated subset of the modes")
    ap.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated subset")
    ap.add_argument("--no-a3po", action="store_true", help="skip the loglinear/recompute runs")
    ap.add_argument("--no-startup", action="store_true",
                    help="skip the periodic runs with waiting (non-eager) micro-batches")
    ap.add_argument("--quick", action="store_true", help="12 steps (2 warm-up), 2 repetitions")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="an override for every run (repeatable), e.g. for an A/B of one key")
    ap.add_argument("--reuse", default="", help="a previous run's temp dir: summarize its runs again")
    ap.add_argument("--contention", default="",
                    help="bench_contention's result for the bounds (default: OUT/contention.json, "
                         "used only when written within an hour before the runs; a file named here "
                         "is used whatever its age)")
    a = ap.parse_args()
    global WARMUP
    if a.quick:
        a.steps, a.reps, WARMUP = 12, 2, 2
    modes = [m for m in a.modes.split(",") if m]
    workloads = [w for w in a.workloads.split(",") if w]
    bad = [m for m in modes if m not in MODES] + [w for w in workloads if w not in WORKLOADS]
    if bad:
        ap.error(f"unknown mode or workload: {', '.join(bad)}")
    if "sync_decoupled" not in modes:  # the simulator's and the bound's uncontended reference
        modes.insert(0, "sync_decoupled")
    os.makedirs(a.out, exist_ok=True)
    cores = os.cpu_count() or 1
    calibration = os.path.join(a.out, "calibration.json")
    tmp = a.reuse or tempfile.mkdtemp(prefix="asyncrl-e2e-")
    print(f"[e2e] run directories under {tmp} (--reuse {tmp} summarizes them again)", file=sys.stderr)
    runs = {}  # (workload, mode) -> list of (summary, rows)
    startup_wait = []  # summaries of the periodic runs with waiting micro-batches
    run_dirs = []

    def train(workload, mode, extra, tag):
        cfg, mode_extra = MODES[mode]
        run_dir = os.path.join(tmp, f"{workload}-{mode}-{tag}")
        run_dirs.append(run_dir)
        if not (a.reuse and os.path.exists(os.path.join(run_dir, "summary.json"))):
            run([a.bin, "train", "-c", os.path.join(ROOT, "configs", cfg), f"model.path={a.model}",
                 f"trainer.total_steps={a.steps}", f"runtime.run_dir={run_dir}"] + COMMON +
                WORKLOADS[workload] + mode_extra + a.set + extra)
        rows = metrics(run_dir)
        return summarize_run(rows, cores, WORKERS.get(mode, 1)), rows

    for rep in range(a.reps):
        for workload in workloads:
            # Rotate the order each repetition: no mode always runs first or last.
            for mode in modes[rep % len(modes):] + modes[:rep % len(modes)]:
                print(f"[e2e] rep {rep + 1}/{a.reps} {workload} {mode}", file=sys.stderr, flush=True)
                runs.setdefault((workload, mode), []).append(train(workload, mode, [], f"r{rep}"))
            # Start-up, before / after in the same repetition: periodic with the trainer waiting
            # for full micro-batches (trainer.eager_micro_batches=false, as before issue 15).
            if workload == "balanced" and "periodic" in modes and not a.no_startup:
                print(f"[e2e] rep {rep + 1}/{a.reps} {workload} periodic, waiting micro-batches",
                      file=sys.stderr, flush=True)
                s, _ = train(workload, "periodic", ["trainer.eager_micro_batches=false"], f"wait-r{rep}")
                startup_wait.append(s)

    # A-3PO end to end: the same fully async run with loglinear and with recompute prox.
    a3po = {}
    if not a.no_a3po:
        for rep in range(a.reps):
            for prox in ("loglinear", "recompute"):
                print(f"[e2e] rep {rep + 1}/{a.reps} a3po {prox}", file=sys.stderr, flush=True)
                s, _ = train("balanced", "fully_async_partial",
                             ["algorithm.loss=decoupled", f"algorithm.prox_logp={prox}"], f"a3po-{prox}-r{rep}")
                a3po.setdefault(prox, []).append(s["step_s"])

    sim = RunSimulator(a.sim_bin or a.bin, a.steps, cores, calibration, tmp)
    result = {"benchmark": "e2e", "machine": {"cores": cores}, "steps": a.steps, "reps": a.reps,
              "warmup_steps": WARMUP, "common_overrides": COMMON, "workloads": {}}
    validation = {"benchmark": "simulator_validation", "calibration": calibration,
                  "method": "each run simulated with its own measured costs: base costs from the "
                            "calibration scaled to sync_decoupled's measured busy time (same workload "
                            "and repetition), contention from the run's own busy time, the run's "
                            "own response lengths (balanced: per-step means, replayed)",
                  "runs": []}
    for workload in workloads:
        out = {}
        for mode in modes:
            reps = runs[(workload, mode)]
            m = {k: median([s[k] for s, _ in reps if s[k] is not None]) for k in reps[0][0]}
            m["step_s_reps"] = [s["step_s"] for s, _ in reps]
            sims, factors = [], []
            for i, (_, rows) in enumerate(reps):
                sd_rows = runs[(workload, "sync_decoupled")][i][1]
                p, fac = sim.predict(workload, mode, rows, sd_rows)
                sims.append(p["mean_step_s"])
                factors.append(fac)
            for k in ("k_gen", "k_train", "c_gen", "c_train"):
                m[k] = median([x[k] for x in factors])
            m["simulated_step_s"] = median(sims)
            m["simulator_error"] = (m["simulated_step_s"] - m["step_s"]) / m["step_s"]
            validation["runs"].append({"workload": workload, "mode": mode, "measured_step_s": m["step_s"],
                                       "simulated_step_s": m["simulated_step_s"],
                                       "relative_error": m["simulator_error"],
                                       "k_gen": m["k_gen"], "k_train": m["k_train"],
                                       "c_gen": m["c_gen"], "c_train": m["c_train"]})
            out[mode] = m
        wl = {"overrides": WORKLOADS[workload], "modes": out}
        if "sync" in out:
            wl["speedup_vs_sync"] = {k: out["sync"]["step_s"] / v["step_s"] for k, v in out.items() if k != "sync"}
        wl["speedup_vs_sync_decoupled"] = {k: out["sync_decoupled"]["step_s"] / v["step_s"]
                                           for k, v in out.items() if k != "sync_decoupled"}
        result["workloads"][workload] = wl
    # The headline: each mode's speed-up over colocated sync on the workload of its target
    # (periodic: balanced; the fully async modes: long tail).
    pick = {"sync_decoupled": "balanced", "periodic": "balanced",
            "fully_async_stale": "long_tail", "fully_async_partial": "long_tail"}
    result["speedup"] = {m: result["workloads"][w]["speedup_vs_sync"][m] for m, w in pick.items()
                         if w in result["workloads"] and m in result["workloads"][w].get("speedup_vs_sync", {})}
    result["speedup_workload"] = pick
    # The bounds' contention factors: bench_contention's, measured apart from the runs they judge
    # (contention.json of this suite run, the mode of the runs' runtime.affinity).
    cpath = a.contention or os.path.join(a.out, "contention.json")
    result["contention_bench"] = load_optional(cpath)
    result["affinity"] = affinity_of(a.set)
    contention = independent_contention(result["contention_bench"], result["affinity"],
                                        os.path.basename(cpath),
                                        None if a.contention else contention_age_s(cpath, run_dirs))
    result["bound_contention"] = contention
    if "missing" in contention:
        print(f"[e2e] no independent bound: {contention['missing']}", file=sys.stderr)
    result["targets"] = speed_targets(result, contention)
    for key, t in result["targets"].items():
        result[f"speedup.{key}"] = t["measured"]
        result[f"bound.{t['mode']}"] = t["bound"]
        result[f"bound_self.{t['mode']}"] = t["bound_self"]
    if startup_wait:
        keys = ["step_s", "first_group_s", "first_train_s", "tail_s", "trainer_idle_ratio",
                "micro_batches"]
        eager = [s for s, _ in runs[("balanced", "periodic")]]
        pick = lambda v, k: median([s[k] for s in v if s.get(k) is not None])  # noqa: E731
        result["startup"] = {
            "workload": "balanced", "mode": "periodic",
            "what": "eager: trainer.eager_micro_batches=true (default); wait: false. Medians over "
                    "repetitions of per-run medians over steps after the warm-up",
            "eager": {k: pick(eager, k) for k in keys},
            "wait": {k: pick(startup_wait, k) for k in keys}}
    errs = [abs(r["relative_error"]) for r in validation["runs"]]
    validation["max_abs_relative_error"] = max(errs)
    validation["within_15_percent"] = sum(e <= SIM_ERROR_OK for e in errs)
    validation["runs_total"] = len(errs)

    outputs = [("e2e", result), ("simulator_validation", validation)]
    if a3po:
        a3po_out = {"benchmark": "a3po_e2e", "workload": "balanced", "mode": "fully_async_partial",
                    "loglinear_step_s": median(a3po["loglinear"]), "recompute_step_s": median(a3po["recompute"])}
        a3po_out["speedup"] = a3po_out["recompute_step_s"] / a3po_out["loglinear_step_s"]
        outputs.append(("a3po_e2e", a3po_out))
    for name, obj in outputs:
        with open(os.path.join(a.out, f"{name}.json"), "w") as f:
            json.dump(obj, f, indent=2)
    plots(a.out, runs, result, modes)
    for t in result["targets"].values():
        print(f"[e2e] {t['overlap_note']}", file=sys.stderr)
    print(json.dumps({"speedup": result["speedup"], "targets": result["targets"],
                      "simulator": [(r["workload"], r["mode"], round(r["relative_error"], 3))
                                    for r in validation["runs"]],
                      "simulator_max_error": validation["max_abs_relative_error"]}, indent=2))


def plots(out, runs, result, modes):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for mode in modes:
        if ("balanced", mode) not in runs:
            continue
        _, rows = runs[("balanced", mode)][0]
        r, acc = [], []
        for row in rows:  # moving average over 5 steps
            acc = (acc + [row["reward_mean"]])[-5:]
            r.append(sum(acc) / len(acc))
        ax.plot([row["wall_time_s"] for row in rows], r, label=mode)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("reward (mean over 5 steps)")
    ax.set_title("reward vs wall time, every mode (balanced workload, same model and seed)")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "e2e_reward.png"), dpi=110)

    fig, ax = plt.subplots(figsize=(8, 4.5))
    width = 0.38
    for i, (workload, wl) in enumerate(result["workloads"].items()):
        xs = [j + (i - 0.5) * width for j in range(len(modes))]
        ax.bar(xs, [wl["modes"][m]["step_s"] for m in modes], width, label=f"{workload} (measured)")
        ax.plot(xs, [wl["modes"][m]["simulated_step_s"] for m in modes], "k_", markersize=14,
                label="simulated" if i == 0 else None)
    ax.set_xticks(range(len(modes)))
    ax.set_xticklabels(modes, rotation=15)
    ax.set_ylabel("wall time per step (s)")
    ax.set_title("step time per mode (bars) and the simulator's prediction (marks)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, "e2e_step_time.png"), dpi=110)


if __name__ == "__main__":
    main()

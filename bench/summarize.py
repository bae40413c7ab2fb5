#!/usr/bin/python3
"""Summarizes bench/results/*.json into bench/results/summary.md and PNG plots (shared-prompt
attention, the simulator's scale study). Every figure is a ratio measured in one run.

    bench/summarize.py [--results bench/results]

A benchmark whose JSON is missing is listed as not run; nothing is filled in for it.
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e as E2E  # noqa: E402  (bench/e2e.py: the bound arithmetic, in one place)


def load(res, name):
    path = os.path.join(res, f"{name}.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def f(x, nd=2):
    return f"{x:.{nd}f}"


def e2e_section(e2e, val):
    md = ["## End to end: every mode side by side",
          f"`bench/e2e.py`: {e2e['steps']} optimizer steps per run, {e2e['reps']} interleaved "
          f"repetitions (medians), first {e2e['warmup_steps']} steps excluded. "
          "Speed-ups are ratios of wall time per step to colocated `sync` in the same run."]
    for w, wl in e2e["workloads"].items():
        md.append(f"\n### {w} workload\n")
        rows = []
        for m, x in wl["modes"].items():
            rows.append([m, f(x["step_s"], 3), f(wl.get("speedup_vs_sync", {}).get(m, 1.0)),
                         f(wl["speedup_vs_sync_decoupled"].get(m, 1.0)), f(x["tpspd"], 0),
                         f(x["trainer_idle_ratio"]), f(x["rollouter_idle_ratio"]),
                         x["staleness_max"], f(x["partial_ratio"]), f(x["simulated_step_s"], 3),
                         f"{100 * x['simulator_error']:+.0f}%"])
        md.append(table(["mode", "s/step", "vs colocated sync", "vs decoupled sync",
                         "tokens/s/core", "trainer idle", "rollouter idle", "max staleness",
                         "partial ratio", "simulated s/step", "sim error"], rows))
    md.append("\nPlots: `e2e_reward.png` (reward vs wall time, every mode), `e2e_step_time.png`.")
    if val:
        md.append(f"\nSimulator validation: {val['within_15_percent']} of {val['runs_total']} runs "
                  f"within 15%, largest error {100 * val['max_abs_relative_error']:.0f}%.")
        if "method" in val:
            md.append(f"Method: {val['method']} (`bench/e2e.py` docstring, `docs/benchmarks.md`).\n")
            md.append(table(["workload", "mode", "measured s/step", "simulated s/step", "error",
                             "k_gen", "k_train", "c_gen", "c_train"],
                            [[x["workload"], x["mode"], f(x["measured_step_s"], 3),
                              f(x["simulated_step_s"], 3), f"{100 * x['relative_error']:+.1f}%",
                              f(x["k_gen"]), f(x["k_train"]), f(x["c_gen"]), f(x["c_train"])]
                             for x in val["runs"]]))
    return md


def _yes(ok):
    return "met" if ok else "**not met**"


def speed_targets(e2e):
    """e2e.json's speed-up targets with both bounds. An e2e.json written before the bounds took
    bench_contention's factors (no "bound_self") is recomputed here from its own phase times
    and its copy of contention.json (`contention_bench`), with bench/e2e.py's arithmetic."""
    targets = e2e.get("targets") or {}
    if not targets or all("bound_self" in t for t in targets.values()):
        return targets
    contention = E2E.independent_contention(e2e.get("contention_bench"), e2e.get("affinity", "none"),
                                            "contention_bench in e2e.json")
    out = E2E.speed_targets(e2e, contention)
    for t in out.values():
        t["recomputed"] = True
    return out


def bound_cells(t):
    """[measured, bound / how, status] of one speed-up target (an e2e.speed_targets entry)."""
    x = t["measured"]
    if t["bound"] is not None:
        measured = f"{x:.2f}x ({100 * t['share_of_bound']:.1f}% of bound"
        bound = (f"bound {t['bound']:.2f}x with bench_contention's c_gen {t['c_gen']:.2f}, "
                 f"c_train {t['c_train']:.2f}")
    else:
        measured = f"{x:.2f}x (bound not measured"
        bound = f"bound not measured: {t['contention_missing']}"
    measured += (f"; {100 * t['share_of_bound_self']:.0f}% of self bound; "
                 f"{100 * t['share_of_ceiling']:.0f}% of ceiling)")
    bound += (f"; self bound {t['bound_self']:.2f}x with the judged run's own c_gen "
              f"{t['c_gen_self']:.2f}, c_train {t['c_train_self']:.2f} (not judged against); "
              f"ceiling {t['ceiling']:.2f}x (c = 1); bound = {t['bound_formula']}; "
              f"T_gen {t['T_gen_s']:.3f} s, T_train {t['T_train_s']:.3f} s "
              f"(T_train / T_gen {t['T_train_over_T_gen']:.2f})")
    if t.get("recomputed"):
        bound += "; recomputed by summarize.py from e2e.json"
    status = "**not judged**: no bound from bench_contention" if t["met"] is None else _yes(t["met"])
    return [measured, bound, status]


def target_rows(r):
    """Issue 15's targets: [what, target, measured, bound / reference, met], each from results
    of the same suite run; a figure that was not measured says so."""
    rows = []
    e2e = r.get("e2e") or {}
    for key, t in speed_targets(e2e).items():
        need = f">= {t['target']}x"
        if t.get("frac_of_bound"):
            need += f" and >= {100 * t['frac_of_bound']:.0f}% of bound"
        rows.append([f"{t['mode']} / {t['base']}, {t['workload']}", need] + bound_cells(t))
    if not rows:
        rows.append(["step-time speed-ups", ">= 1.6x / >= 2.0x", "not measured", "e2e.json missing", "-"])
    lr = r.get("learning")
    tta = time_to_accuracy(lr) if lr else None
    if tta:
        rows.append(["time to target accuracy: fastest async mode vs colocated sync",
                     ">= 1.8x at the same final accuracy",
                     f"{tta['speedup']:.2f}x ({tta['mode']} {tta['fast_s']:.1f} s vs sync {tta['sync_s']:.1f} s)",
                     f"target accuracy {lr['target']:.3f}; final accuracy {tta['fast_acc']:.3f} vs "
                     f"{tta['sync_acc']:.3f} (same: within {ACC_TOL})", _yes(tta["met"])])
    else:
        rows.append(["time to target accuracy", ">= 1.8x", "not measured",
                     "learning.json missing, or sync / an async mode never reached the target", "-"])
    # Keyed by workload and mode: one mode's share on one workload must not hide the other's.
    shares = {f"{wn} {m}": x.get("overhead_cpu_share")
              for wn, w in e2e.get("workloads", {}).items()
              for m, x in w["modes"].items() if x.get("overhead_cpu_share") is not None}
    if shares:
        worst = max(shares, key=shares.get)
        rows.append(["actor messaging share of step time (CPU)", "< 1% in every mode",
                     f"{100 * shares[worst]:.2f}% (worst: {worst})",
                     "median over steps of metrics.jsonl overhead_cpu_share, e2e runs",
                     _yes(shares[worst] < 0.01)])
    else:
        rows.append(["actor messaging share of step time (CPU)", "< 1%", "not measured",
                     "no overhead_cpu_share in metrics.jsonl", "-"])
    per = (e2e.get("workloads") or {}).get("balanced", {}).get("modes", {}).get("periodic", {})
    if per.get("first_group_s") is not None:
        rows.append(["periodic start-up (balanced): first group at the trainer / training after the last",
                     "reduce", f"{per['first_group_s']:.3f} s / {per['tail_s']:.3f} s of {per['step_s']:.3f} s",
                     "medians over steps of metrics.jsonl first_group_s and step_time_s - last_group_s",
                     "measured"])
    su = e2e.get("startup")
    if su and su["wait"].get("first_train_s") is not None and su["eager"].get("first_train_s") is not None:
        w, e = su["wait"], su["eager"]
        rows.append(["periodic start-up (balanced): first forward/backward of the step, waiting -> eager micro-batches",
                     "reduce", f"{w['first_train_s']:.3f} s -> {e['first_train_s']:.3f} s; step "
                     f"{w['step_s']:.3f} -> {e['step_s']:.3f} s",
                     "medians of metrics.jsonl first_train_s and the step time, same repetitions",
                     _yes(e["first_train_s"] < w["first_train_s"] and e["step_s"] < w["step_s"])])
    cb = e2e.get("contention_bench") or {}
    if cb.get("modes"):
        def fmt(m):
            x = cb["modes"][m]
            return f"{m}: gen {x['contention_gen']:.2f}, train {x['contention_train']:.2f}"
        rows.append(["contention factor (together / alone), bench_contention",
                     "measure before / after", "; ".join(fmt(m) for m in cb["modes"]),
                     "none: threads unpinned (the default); roles: runtime.affinity=roles", "measured"])
    ws = r.get("weight_sync")
    if ws and ws.get("sizes"):
        worst = min(ws["sizes"], key=lambda x: x["ratio_to_memcpy"])
        rows.append(["in-process weight sync vs memcpy", ">= 0.50 at every size",
                     f"{worst['ratio_to_memcpy']:.2f} (worst: {worst['bytes'] / 1e6:.0f} MB)",
                     "bench_weight_sync: memcpy_ms / sync_ms", _yes(worst["ratio_to_memcpy"] >= 0.5)])
    else:
        rows.append(["in-process weight sync vs memcpy", ">= 0.50", "not measured", "weight_sync.json missing", "-"])
    val = r.get("simulator_validation")
    if val and val.get("runs"):
        per = ", ".join(f"{x['workload'][0]}/{x['mode']} {100 * x['relative_error']:+.0f}%" for x in val["runs"])
        rows.append(["simulator: predicted vs measured step time", "every run within 15%",
                     f"{val['within_15_percent']} of {len(val['runs'])} within; worst "
                     f"{100 * val['max_abs_relative_error']:.0f}%", per,
                     _yes(val["within_15_percent"] == len(val["runs"]))])
    else:
        rows.append(["simulator: predicted vs measured step time", "within 15%", "not measured",
                     "simulator_validation.json missing", "-"])
    lt = (e2e.get("workloads") or {}).get("long_tail", {}).get("modes", {})
    ratios = {m: x["processed_to_real_tokens"] for m, x in lt.items() if x.get("processed_to_real_tokens")}
    if ratios:
        worst = max(ratios, key=ratios.get)
        rows.append(["trainer processed / real tokens, long tail", "<= 1.10 in every mode",
                     f"{ratios[worst]:.3f} (worst: {worst})",
                     "sum tokens_processed / sum tokens_real over the run", _yes(ratios[worst] <= 1.10)])
    else:
        rows.append(["trainer processed / real tokens, long tail", "<= 1.10", "not measured",
                     "no tokens_real in metrics.jsonl", "-"])
    return rows


ACC_TOL = 0.03  # "the same final accuracy": the async mode's is at least sync's minus this
SYNC_MODES = ("sync", "sync_decoupled")


def time_to_accuracy(lr):
    """Fastest async mode's median time to the target vs colocated sync's (learning.json)."""
    modes = lr.get("modes") or {}

    def ttt(m):
        return m.get("time_to_target_median_s") or m.get("time_to_target_median_of_reached_s")
    sync = modes.get("sync")
    fast = [m for k, m in modes.items() if k not in SYNC_MODES and ttt(m)]
    if not sync or not ttt(sync) or not fast:
        return None
    best = min(fast, key=ttt)
    out = {"mode": best["mode"], "fast_s": ttt(best), "sync_s": ttt(sync),
           "fast_acc": best["final_accuracy_mean"], "sync_acc": sync["final_accuracy_mean"]}
    out["speedup"] = out["sync_s"] / out["fast_s"]
    out["met"] = out["speedup"] >= 1.8 and out["fast_acc"] >= out["sync_acc"] - ACC_TOL
    return out


def targets_section(r):
    md = ["## Targets (issue 15)",
          "Every figure comes from this suite run. Bounds: T_gen, T_train are the medians over "
          "steps (after the warm-up) of sync_decoupled's rollout busy time "
          "(step_time_s x (1 - rollouter_idle_ratio)) and trainer busy time "
          "(step_time_s x (1 - trainer_idle_ratio)) on the same workload. The bound takes its "
          "contention factors c_gen, c_train from `bench_contention` (contention.json, the mode of "
          "the runs' `runtime.affinity`), measured apart from the run it judges; the share of the "
          "bound is of this one. The self bound takes them from the overlapped run itself (its "
          "busy time per unit of simulated work over sync_decoupled's, divided by the share of "
          "that phase that overlapped the other; `bench/e2e.py`): a slow run raises its own c and "
          "lowers its own bar, so it is shown, not judged against. The ceiling is c = 1: overlap "
          "hides the shorter phase completely. With c_gen = c_train = c the periodic bound is "
          "(T_gen + T_train) / (c max(T_gen, T_train)).\n"]
    md.append(table(["target", "required", "measured", "bound / how", "status"], target_rows(r)))
    notes = [t.get("overlap_note") or E2E.overlap_note(t)
             for t in speed_targets(r.get("e2e") or {}).values()]
    if notes:
        md.append("\nWhat overlap can gain on this machine (the balance of training and generation "
                  "decides it):\n")
        md += [f"- {n}" for n in notes]
    cb = (r.get("e2e") or {}).get("contention_bench")
    if cb:
        md.append(f"\n`bench_contention` (contention.json): "
                  + ", ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                              for k, v in cb.items() if isinstance(v, (int, float))) + ".")
    return md


def components_section(r):
    md = ["## Components"]
    sp = r.get("shared_prompt")
    if sp:
        md.append("\n### Shared-prompt attention (forward + backward of one group)\n")
        md.append("packed = padding-free with per-block attention (the default); dense mask = "
                  "`trainer.padding_free=false`; unpacked = one padded row per response.\n")
        md.append(table(["Lp", "Lr", "K", "packed ms", "dense-mask ms", "unpacked ms",
                         "speed-up", "dense-mask speed-up", "token ratio", "rho",
                         "per-block work ratio", "dense-mask ratio"],
                        [[s["Lp"], s["Lr"], s["K"], f(s["packed_ms"]),
                          f(s.get("dense_mask_ms", float("nan"))), f(s["unpacked_ms"]),
                          f(s["speedup"]), f(s.get("dense_mask_speedup", float("nan"))),
                          f(s["token_ratio"]), f(s["rho"]),
                          f(s.get("segment_attention_ratio", float("nan"))),
                          f(s["dense_attention_ratio"])] for s in sp["shapes"]]))
        lt = sp.get("long_tail")
        if lt:
            md.append(f"\nLong tail ({lt['responses']} responses, {lt['lengths']}): padded to the "
                      f"longest {f(lt['padded_ms'], 1)} ms, processed/real tokens "
                      f"{f(lt['processed_over_real_padded'])}; padding-free "
                      f"{f(lt['padding_free_ms'], 1)} ms, processed/real "
                      f"{f(lt['processed_over_real_padding_free'])}: {f(lt['speedup'])}x.")
    px = r.get("prox")
    if px:
        md.append("\n### A-3PO proximal policy\n")
        md.append(table(["", "loglinear", "recompute", "ratio"],
                        [["prox log-probs (ms)", f(px["loglinear_prox_ms"], 3),
                          f(px["recompute_prox_ms"], 3), f(px["prox_cost_ratio"], 0) + "x"],
                         ["trainer step (ms)", f(px["loglinear_step_ms"], 1),
                          f(px["recompute_step_ms"], 1), f(px["step_speedup"]) + "x"]]))
    a3 = r.get("a3po_e2e")
    if a3:
        md.append(f"\nEnd to end ({a3['mode']}, {a3['workload']}): {f(a3['loglinear_step_s'], 3)} "
                  f"s/step with loglinear, {f(a3['recompute_step_s'], 3)} with recompute: "
                  f"{f(a3['speedup'])}x.")
    md.append("\n### Runtime overhead\n")
    rows = []
    q = r.get("queue")
    if q:
        rows.append(["MessageQueue throughput", f"{q['queue_groups_per_s']:.0f} groups/s "
                     f"(detached producer/consumer), {q['queue_scheduled_groups_per_s']:.0f} "
                     f"scheduled", f"{f(q['queue_to_deque_ratio'])}x of a plain std::deque "
                     f"({q['deque_groups_per_s']:.0f}/s)"])
    ao = r.get("actor_overhead")
    if ao:
        worst = max(ao["modes"], key=lambda m: m["overhead_share"])
        rows.append(["actor messaging share of step time",
                     f"<= {100 * ao['max_overhead_share']:.2f}% (upper bound, {worst['mode']}: "
                     f"{worst['messages_per_step']:.0f} msgs/step); "
                     f"{100 * worst['overhead_share_at_cheapest']:.3f}% at scheduled cost",
                     "target < 1%: " + ("met" if ao["met"] else "**upper bound misses**")])
    ws = r.get("weight_sync")
    if ws:
        big = ws["sizes"][-1]
        rows.append(["weight sync vs memcpy", ", ".join(
            f"{s['bytes'] / 1e6:.0f} MB: {f(s['ratio_to_memcpy'])}" for s in ws["sizes"]),
            f"target >= 0.50; largest: {f(big['sync_GBps'])} GB/s vs memcpy "
            f"{f(big['memcpy_GBps'])} GB/s; msgpack {f(big['msgpack_GBps'])} GB/s"])
    cb = r.get("continuous_batching")
    if cb:
        rows.append(["continuous vs static batching (long tail)", ", ".join(
            f"{x['threads']} thread(s): {f(x['speedup'])}x" for x in cb["results"]),
            f"slot utilisation {f(cb['results'][0]['continuous_slot_utilisation'])} vs "
            f"{f(cb['results'][0]['static_slot_utilisation'])}"])
    g = r.get("generation")
    if g:
        rows.append(["KV-cache decoding vs recompute", f"{f(g['speedup'], 1)}x",
                     f"{g['kv_cache_tokens_per_s']:.0f} tokens/s"])
    if rows:
        md.append(table(["what", "measured", "reference"], rows))
    return md


def sim_section(sim, res):
    md = ["## Simulator at cluster scale (`bench_sim_scale`)",
          "Assumed per-device costs (not measured here): " +
          ", ".join(f"{k} {v}" for k, v in sim["assumed_costs_per_device"].items()) + "."]
    md.append("\n### Periodic vs sync, balanced\n")
    md.append(table(["devices", "prompts/device", "waves", "colocated sync s", "decoupled sync s",
                     "periodic s", "periodic vs decoupled sync", "periodic vs colocated sync"],
                    [[x["devices"], x["prompts_per_device"], x["waves"], f(x["colocated_sync_s"]),
                      f(x["decoupled_sync_s"]), f(x["periodic_s"]),
                      f(x["periodic_vs_decoupled_sync"]), f(x["periodic_vs_colocated_sync"])]
                     for x in sim["periodic_balanced"] + sim["periodic_waves"]]))
    st = sim["staleness_long_tail"]
    md.append(f"\n### Staleness and partial rollout, long tail, {st['devices']} devices\n")
    md.append(table(["mode", "staleness_threshold", "partial rollout", "s/step",
                     "vs colocated sync"],
                    [[x["mode"], x.get("staleness_threshold", "-"),
                      x.get("partial_rollout", "-"), f(x["step_s"]),
                      f(x["speedup_vs_colocated_sync"])] for x in st["runs"]]))
    md.append("\n### Recommended rollout:train split (fully async, s = 0.5, partial rollout)\n")
    md.append(table(["devices", "workload", "rollout", "train", "s/step"],
                    [[x["devices"], x["workload"], x["recommended_rollout_devices"],
                      x["recommended_train_devices"], f(x["step_s"])]
                     for x in sim["split_recommendation"]]))
    md.append("\n" + sim_recommendation(sim))
    md.append("\nPlot: `sim_scale.png`.")
    return md


def sim_recommendation(sim):
    """One sentence: the split and staleness the simulator recommends at 16-128 devices."""
    runs = [x for x in sim["staleness_long_tail"]["runs"] if x["mode"] == "fully_async"]
    best = min(runs, key=lambda x: x["step_s"]) if runs else None
    splits = {}
    for x in sim["split_recommendation"]:
        if 16 <= x["devices"] <= 128:
            splits.setdefault(x["workload"], []).append(
                f"{x['recommended_rollout_devices']}:{x['recommended_train_devices']} at {x['devices']}")
    parts = [f"{w}: rollout:train " + ", ".join(v) for w, v in splits.items()]
    out = ("**Recommendation (simulated with the assumed costs above, not measured):** for 16-128 "
           "devices, " + "; ".join(parts) + " devices")
    if best:
        out += (f"; staleness_threshold {best['staleness_threshold']} with partial rollout "
                f"{'on' if best['partial_rollout'] else 'off'} (the fastest of the staleness study, "
                f"{best['speedup_vs_colocated_sync']:.2f}x colocated sync at "
                f"{sim['staleness_long_tail']['devices']} devices, long tail)")
    return out + "."


def plots(r, res):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sp = r.get("shared_prompt")
    if sp:
        fig, ax = plt.subplots(figsize=(7, 4))
        labels = [f"Lp={s['Lp']}\nLr={s['Lr']} K={s['K']}" for s in sp["shapes"]]
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], [s["speedup"] for s in sp["shapes"]], 0.4,
               label="measured speed-up")
        ax.bar([x + 0.2 for x in xs], [s["token_ratio"] for s in sp["shapes"]], 0.4,
               label="token ratio")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels)
        ax.axhline(1, color="k", lw=0.5)
        ax.set_title("shared-prompt attention vs unpacked (forward + backward)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(res, "shared_prompt.png"), dpi=110)

    sim = r.get("sim_scale")
    if sim:
        fig, axs = plt.subplots(1, 3, figsize=(15, 4.2))
        w = sim["periodic_waves"]
        axs[0].plot([x["waves"] for x in w], [x["periodic_vs_decoupled_sync"] for x in w], "o-",
                    label="vs decoupled sync")
        axs[0].plot([x["waves"] for x in w], [x["periodic_vs_colocated_sync"] for x in w], "s-",
                    label="vs colocated sync")
        axs[0].axhline(2, color="k", ls="--", lw=0.7)
        axs[0].set_xscale("log", base=2)
        axs[0].set_xlabel(f"generation waves per step ({w[0]['devices']} devices)")
        axs[0].set_ylabel("periodic speed-up")
        axs[0].set_title("periodic, balanced")
        axs[0].legend()
        runs = [x for x in sim["staleness_long_tail"]["runs"] if x["mode"] == "fully_async"]
        for partial in (False, True):
            pts = [x for x in runs if x["partial_rollout"] == partial]
            axs[1].plot([x["staleness_threshold"] for x in pts],
                        [x["speedup_vs_colocated_sync"] for x in pts], "o-",
                        label=f"partial rollout {'on' if partial else 'off'}")
        axs[1].set_xlabel("staleness_threshold")
        axs[1].set_ylabel("speed-up vs colocated sync")
        axs[1].set_title(f"fully async, long tail, {sim['staleness_long_tail']['devices']} devices")
        axs[1].legend()
        for x in sim["split_recommendation"]:
            c = x["curve"]
            axs[2].plot([p["rollout_devices"] / x["devices"] for p in c], [p["step_s"] for p in c],
                        "o-", label=f"{x['devices']} dev, {x['workload']}")
        axs[2].set_xlabel("rollout share of devices")
        axs[2].set_ylabel("s/step")
        axs[2].set_title("rollout:train split")
        axs[2].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(res, "sim_scale.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--results", default=os.path.join(ROOT, "bench", "results"))
    a = ap.parse_args()
    res = a.results
    names = ["e2e", "simulator_validation", "a3po_e2e", "shared_prompt", "prox", "generation",
             "train", "queue", "actor_overhead", "weight_sync", "continuous_batching",
             "sim_scale", "calibration", "learning", "contention"]
    r = {n: load(res, n) for n in names}
    cal = r["calibration"]
    md = ["# asyncrl benchmark summary", ""]
    if cal:
        md.append(f"Machine: {cal['machine']['cpu']}, {cal['machine']['cores']} cores. "
                  "Written by `scripts/bench.sh`; regenerate with `bench/summarize.py`.")
    missing = [n for n in names if r[n] is None]
    if missing:
        md.append(f"\nNot run: {', '.join(missing)}.")
    # `scripts/bench.sh --quick` skips some benchmarks: their files are from an earlier run.
    e2e_path = os.path.join(res, "e2e.json")
    if os.path.exists(e2e_path):
        t0 = os.path.getmtime(e2e_path) - 3 * 3600  # a full suite takes about 2 hours
        old = [n for n in names if r[n] is not None and os.path.getmtime(os.path.join(res, f"{n}.json")) < t0]
        if old:
            md.append(f"\nFrom an earlier suite run (older than e2e.json by over 3 hours): {', '.join(old)}.")
    targets = targets_section(r)
    md += [""] + targets
    if r["e2e"]:
        md += [""] + e2e_section(r["e2e"], r["simulator_validation"])
    md += [""] + components_section(r)
    if r["sim_scale"]:
        md += [""] + sim_section(r["sim_scale"], res)
    with open(os.path.join(res, "summary.md"), "w") as f_:
        f_.write("\n".join(md) + "\n")
    plots(r, res)
    # The target table on stdout too (scripts/bench.sh ends with it).
    print("\n".join(targets))
    print(os.path.join(res, "summary.md"))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Summarizes bench/results/*.json into bench/results/summary.md and PNG plots (shared-prompt
attention, the simulator's scale study). Every figure is a ratio measured in one run.

    bench/summarize.py [--results bench/results]

A benchmark whose JSON is missing is listed as not run; nothing is filled in for it.
"""
import argparse
import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
            rows.append([m, f(x["step_s"], 3), f(wl["speedup_vs_sync"].get(m, 1.0)),
                         f(wl["speedup_vs_sync_decoupled"].get(m, 1.0)), f(x["tpspd"], 0),
                         f(x["trainer_idle_ratio"]), f(x["rollouter_idle_ratio"]),
                         x["staleness_max"], f(x["partial_ratio"]), f(x["simulated_step_s"], 3),
                         f"{100 * x['simulator_error']:+.0f}%"])
        md.append(table(["mode", "s/step", "vs colocated sync", "vs decoupled sync",
                         "tokens/s/core", "trainer idle", "rollouter idle", "max staleness",
                         "partial ratio", "simulated s/step", "sim error"], rows))
    md.append("\n### Targets\n")
    md.append(table(["mode", "workload", "target", "measured", "met"],
                    [[m, t["workload"], f"{t['target']}x", f"{t['measured']:.2f}x",
                      "yes" if t["met"] else "**no**"] for m, t in e2e["targets"].items()]))
    md.append("\nPlots: `e2e_reward.png` (reward vs wall time, every mode), `e2e_step_time.png`.")
    if val:
        md.append(f"\nSimulator validation: {val['within_15_percent']} of {val['runs_total']} runs "
                  f"within 15%, largest error {100 * val['max_abs_relative_error']:.0f}% "
                  f"({val.get('note', '')}).")
    return md


def components_section(r):
    md = ["## Components"]
    sp = r.get("shared_prompt")
    if sp:
        md.append("\n### Shared-prompt attention (forward + backward of one group)\n")
        md.append(table(["Lp", "Lr", "K", "packed ms", "unpacked ms", "speed-up", "token ratio",
                         "rho", "dense-mask ratio"],
                        [[s["Lp"], s["Lr"], s["K"], f(s["packed_ms"]), f(s["unpacked_ms"]),
                          f(s["speedup"]), f(s["token_ratio"]), f(s["rho"]),
                          f(s["dense_attention_ratio"])] for s in sp["shapes"]]))
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
            f"target >= 0.25; largest: {f(big['sync_GBps'])} GB/s vs memcpy "
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
    md.append("\nPlot: `sim_scale.png`.")
    return md


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
             "sim_scale", "calibration"]
    r = {n: load(res, n) for n in names}
    cal = r["calibration"]
    md = ["# asyncrl benchmark summary", ""]
    if cal:
        md.append(f"Machine: {cal['machine']['cpu']}, {cal['machine']['cores']} cores. "
                  "Written by `scripts/bench.sh`; regenerate with `bench/summarize.py`.")
    missing = [n for n in names if r[n] is None]
    if missing:
        md.append(f"\nNot run: {', '.join(missing)}.")
    if r["e2e"]:
        md += [""] + e2e_section(r["e2e"], r["simulator_validation"])
    md += [""] + components_section(r)
    if r["sim_scale"]:
        md += [""] + sim_section(r["sim_scale"], res)
    with open(os.path.join(res, "summary.md"), "w") as f_:
        f_.write("\n".join(md) + "\n")
    plots(r, res)
    print(os.path.join(res, "summary.md"))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Self-test of bench/learning.py: its parsing and summarising functions on synthetic
metrics.jsonl / summary.json files, plus one pass of the whole driver against a fake `asyncrl`
(a small Python script) so that the subprocess, failure and --resume paths run too.

    /usr/bin/python3 bench/test_learning_summary.py

Prints "N passed, 0 failed" and exits 0, or prints each failure and exits 1.
"""
import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import learning as L  # noqa: E402


def write_run(d, rows, summary):
    """Writes RUN/metrics.jsonl (rows: dicts, or raw strings written as they are) and
    RUN/summary.json (None: no summary file)."""
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "metrics.jsonl"), "w") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    if summary is not None:
        with open(os.path.join(d, "summary.json"), "w") as f:
            json.dump(summary, f)
    return d


def make_rows(n, evals, wall=lambda s: 10.0 * s, reward=lambda s: 0.1 * s):
    """n steps (1..n); evals: {step: (eval_accuracy, cumulative eval_time_s)}."""
    rows = []
    for s in range(1, n + 1):
        r = {"step": s, "wall_time_s": wall(s), "reward_mean": reward(s)}
        if s in evals:
            r["eval_accuracy"], r["eval_time_s"] = evals[s]
        rows.append(r)
    return rows


def ok_summary(initial, final, steps=8):
    return {"ok": True, "error": "", "steps": steps, "initial_eval_accuracy": initial,
            "final_eval_accuracy": final, "wall_time_s": 99.0}


TMP = tempfile.mkdtemp(prefix="learning-test-")
_n = [0]


def fresh():
    _n[0] += 1
    return os.path.join(TMP, f"run{_n[0]}")


def loaded(rows, summary, eval_every=None, mode="m", seed=1):
    r = L.load_run(write_run(fresh(), rows, summary), eval_every)
    r.update(mode=mode, seed=seed)
    return r


# 8 steps, eval every 2. Raw wall time 10*s; cumulative eval time 5, 15, 25, 35 (the evals take
# 5, 10, 10, 10 s). Accuracy crosses 0.44 at step 4, dips, and is >= 0.44 again at step 8.
CROSSING = make_rows(8, {2: (0.30, 5.0), 4: (0.45, 15.0), 6: (0.40, 25.0), 8: (0.45, 35.0)})


# --- time to target -----------------------------------------------------------------------------

def test_time_to_target_first_crossing_training_wall_time():
    r = loaded(CROSSING, ok_summary(0.25, 0.45), eval_every=2)
    assert r["ok"], r["error"]
    s = L.summarize_run(r, 0.44)
    # step 4: 40 s wall - 15 s cumulative eval = 25 s. Raw wall would give 40; subtracting only
    # that eval's 10 s would give 30; the last crossing (step 8) would give 45.
    assert s["time_to_target_s"] == 25.0, s["time_to_target_s"]


def test_eval_curve_starts_at_initial_and_subtracts_cumulative_eval_time():
    curve = L.eval_curve(CROSSING, 0.25)
    assert curve == [(0.0, 0.25), (15.0, 0.30), (25.0, 0.45), (35.0, 0.40), (45.0, 0.45)], curve


def test_never_reaching_target_is_none():
    r = loaded(CROSSING, ok_summary(0.25, 0.45), eval_every=2)
    s = L.summarize_run(r, 0.46)
    assert s["time_to_target_s"] is None
    m = L.summarize_mode("m", [s])
    assert m["reached"] == "0/1" and m["reached_count"] == 0
    assert m["time_to_target_median_s"] is None and m["time_to_target_median_of_reached_s"] is None


def test_target_reached_at_float_sum():
    # Default target 0.2 + 0.1 = 0.30000000000000004: an eval of exactly 0.3 reaches it.
    rows = make_rows(4, {2: (0.3, 1.0), 4: (0.3, 2.0)})
    r = loaded(rows, ok_summary(0.2, 0.3))
    target, initial, spread = L.default_target([r])
    assert initial == 0.2 and spread == 0.0 and target > 0.3
    assert L.summarize_run(r, target)["time_to_target_s"] == 19.0  # 20 s - 1 s of eval


def test_target_at_or_below_start_is_zero():
    r = loaded(CROSSING, ok_summary(0.25, 0.45))
    assert L.summarize_run(r, 0.25)["time_to_target_s"] == 0.0


def test_final_and_train_wall_time():
    r = loaded(CROSSING, ok_summary(0.25, 0.5))
    s = L.summarize_run(r, 0.44)
    assert s["final_accuracy"] == 0.5 and abs(s["delta"] - 0.25) < 1e-12  # final from summary
    assert s["train_wall_s"] == 80.0 - 35.0, s["train_wall_s"]
    assert s["steps"] == 8
    # Without final_eval_accuracy (runtime.eval_after=false): the last in-run evaluation.
    summ = ok_summary(0.25, None)
    del summ["final_eval_accuracy"]
    assert L.summarize_run(loaded(CROSSING, summ), 0.44)["final_accuracy"] == 0.45


# --- reward trend -------------------------------------------------------------------------------

def test_reward_trend_quarters():
    rows = make_rows(10, {}, reward=lambda s: float(s))  # 10 steps: a quarter is 2 steps
    assert L.reward_trend(rows) == (1.5, 9.5), L.reward_trend(rows)  # ceil(10/4)=3 would give 2, 9
    rows = make_rows(8, {}, reward=lambda s: float(s * s))  # 8 steps: first 2, last 2
    assert L.reward_trend(rows) == ((1 + 4) / 2, (49 + 64) / 2), L.reward_trend(rows)
    rows = make_rows(3, {}, reward=lambda s: float(s))  # fewer than 4 steps: one step each end
    assert L.reward_trend(rows) == (1.0, 3.0)
    rows = make_rows(12, {}, reward=lambda s: 12.0 - s)  # decreasing: trend down
    r = loaded([dict(x, eval_accuracy=0.5, eval_time_s=0.0) if x["step"] == 12 else x for x in rows],
               ok_summary(0.25, 0.5))
    s = L.summarize_run(r, 0.9)
    assert (s["reward_first_quarter"], s["reward_last_quarter"]) == (10.0, 1.0)
    assert s["reward_up"] is False


# --- per-mode aggregation -----------------------------------------------------------------------

def build_runs():
    """Mode fast: 2 seeds reach at 10 and 20 s (median 15). Mode slow: 3 seeds reach at 10, 20,
    60 s (median 20, mean 30). Mode flaky: seed 1 reaches at 5 s, seed 2 never, seed 3 fails.
    Mode weak: one seed, delta 0.09 (reaches a low target but does not "learn")."""
    init = 0.375
    runs = []

    def add(mode, seed, t_reach, final, reward_up=True):
        # 8 steps, eval every 2, no eval time. Reaching: accuracy is final from step 2 on and
        # step 2 ends at t_reach s. Not reaching: the start accuracy until the last eval.
        evals = {2: (init, 0.0), 4: (init, 0.0), 6: (init, 0.0), 8: (final, 0.0)}
        wall = (lambda s: 10.0 * s)
        if t_reach is not None:
            evals = {2: (final, 0.0), 4: (final, 0.0), 6: (final, 0.0), 8: (final, 0.0)}
            wall = (lambda s, t=t_reach: t * s / 2)  # step 2 at t_reach s
        rw = (lambda s: 0.1 * s) if reward_up else (lambda s: 1 - 0.1 * s)
        runs.append(loaded(make_rows(8, evals, wall=wall, reward=rw), ok_summary(init, final),
                           eval_every=2, mode=mode, seed=seed))

    add("slow", 1, 60.0, 0.6)
    add("fast", 1, 10.0, 0.55)
    add("slow", 2, 10.0, 0.5)
    add("fast", 2, 20.0, 0.6)
    add("slow", 3, 20.0, 0.7)
    add("flaky", 1, 5.0, 0.8)
    add("flaky", 2, None, 0.44)
    failed = loaded(make_rows(2, {}), {"ok": False, "error": "trainer: boom", "steps": 2},
                    mode="flaky", seed=3)
    runs.append(failed)
    add("weak", 1, 30.0, init + 0.09)
    return runs


def test_load_failed_run():
    failed = [r for r in build_runs() if r["mode"] == "flaky" and r["seed"] == 3][0]
    assert failed["ok"] is False and failed["error"] == "trainer: boom"
    missing = L.load_run(fresh())
    assert not missing["ok"] and "summary.json: missing" in missing["error"], missing["error"]


def test_mode_aggregation():
    res = L.summarize_all(build_runs(), ["slow", "fast", "flaky", "weak"], target=0.45)
    m = res["modes"]
    assert m["slow"]["time_to_target_median_s"] == 20.0, m["slow"]  # median, not the mean 30
    assert m["fast"]["time_to_target_median_s"] == 15.0  # even count: mean of the middle two
    assert m["slow"]["reached"] == "3/3" and m["fast"]["reached"] == "2/2"
    assert abs(m["slow"]["final_accuracy_mean"] - 0.6) < 1e-12
    assert m["slow"]["final_accuracy_min"] == 0.5
    assert abs(m["slow"]["delta_min"] - 0.125) < 1e-12
    assert m["slow"]["learns"] is True and m["fast"]["learns"] is True
    # flaky: seed 3 failed and seed 2 never reached: 1/3, no median, median of those 5 s.
    f = m["flaky"]
    assert f["reached"] == "1/3" and f["reached_count"] == 1, f
    assert f["time_to_target_median_s"] is None and f["time_to_target_median_of_reached_s"] == 5.0
    assert f["runs_ok"] == 2 and f["failed_seeds"] == [3]
    assert abs(f["final_accuracy_mean"] - (0.8 + 0.44) / 2) < 1e-12  # the ok runs only
    assert abs(f["delta_min"] - (0.44 - 0.375)) < 1e-12
    assert f["learns"] is False  # a failed seed (and a seed with delta 0.065)
    assert m["weak"]["learns"] is False  # delta 0.09 < 0.10 although the reward went up
    assert m["weak"]["reached"] == "1/1"  # 0.465 >= 0.45
    # Sorted by median time to target: fast (15), slow (20), weak (30); then flaky (1/3).
    assert list(m) == ["fast", "slow", "weak", "flaky"], list(m)
    assert res["first_to_target"] == "fast"
    assert res["failed_runs"] == 1
    assert res["initial_accuracy"] == 0.375 and res["target_source"] == "--target"
    md = L.markdown(res, {"warm": "w", "eval_every": 2, "seeds": [1, 2, 3], "modes": list(m),
                          "overrides": [], "machine": {"cpu": "c", "nproc": 2}})
    assert "**fast** reaches the target accuracy 0.450 first: median 15.0 s" in md, md
    assert "| flaky | 3 | — | failed |" in md and "flaky seed 3: trainer: boom" in md
    assert "∞ (1/3 reached, median of those 5.0)" in md


def test_learns_needs_reward_up():
    runs = build_runs()
    rows = make_rows(8, {2: (0.6, 0.0), 8: (0.6, 0.0)}, reward=lambda s: 1 - 0.1 * s)
    runs.append(loaded(rows, ok_summary(0.375, 0.6), mode="fast", seed=3))
    res = L.summarize_all(runs, ["fast"], target=0.45)
    assert res["modes"]["fast"]["learns"] is False  # delta 0.225 but the reward fell


def test_tie_is_named():
    runs = [r for r in build_runs() if r["mode"] in ("slow", "fast")]
    runs = [dict(r, mode="slow2") if r["mode"] == "slow" else r for r in runs] + \
        [r for r in build_runs() if r["mode"] == "slow"]
    # slow2 is a copy of slow: the same median (20) and final accuracy; fast (15) is first alone.
    res = L.summarize_all(runs, ["slow", "slow2", "fast"], target=0.45)
    assert res["first_to_target"] == "fast" and res["first_to_target_tied"] == ["fast"]
    res = L.summarize_all([r for r in runs if r["mode"] != "fast"], ["slow", "slow2"], target=0.45)
    assert res["first_to_target_tied"] == ["slow", "slow2"], res["first_to_target_tied"]
    assert "**slow**, **slow2** reach the target accuracy 0.450 first, tied" in L.conclusion(res)


def test_failed_seed_means_not_learns():
    runs = [r for r in build_runs() if r["mode"] == "slow"]  # 3 seeds that all learn
    runs.append(loaded(make_rows(2, {}), {"ok": False, "error": "x"}, mode="slow", seed=4))
    m = L.summarize_all(runs, ["slow"], target=0.45)["modes"]["slow"]
    assert m["learns"] is False and m["reached"] == "3/4" and m["time_to_target_median_s"] is None
    assert m["time_to_target_median_of_reached_s"] == 20.0


def test_default_target_ignores_failed_runs():
    res = L.summarize_all(build_runs(), ["slow", "fast", "flaky", "weak"])
    assert abs(res["target"] - 0.475) < 1e-12 and res["target_source"].startswith("initial")
    # weak's final 0.465 < 0.475: never reached; flaky seed 1 reached at 5 s.
    assert res["modes"]["weak"]["reached"] == "0/1"


def test_mean_curve():
    c = L.mean_curve([[(0, 0.2), (10, 0.4), (20, 0.5)], [(0, 0.2), (14, 0.6)]])
    assert c == [(0.0, 0.2), (12.0, 0.5)], c
    assert L.mean_curve([[], []]) == []


# --- metrics errors name file:line --------------------------------------------------------------

def expect_error(rows, needle, eval_every=None):
    d = write_run(fresh(), rows, None)
    path = os.path.join(d, "metrics.jsonl")
    try:
        L.load_metrics(path, eval_every)
    except L.MetricsError as e:
        assert f"{path}:{needle}" in str(e), str(e)
        return str(e)
    raise AssertionError(f"no error for {needle}")


def test_metrics_errors_name_file_and_line():
    good = make_rows(4, {2: (0.5, 1.0), 4: (0.5, 2.0)})
    assert "invalid JSON" in expect_error(good[:2] + ['{"step": 3, "wall_'] + good[3:], "3:")
    bad = [dict(r) for r in good]
    del bad[1]["reward_mean"]
    assert "no reward_mean" in expect_error(bad, "2:")
    bad = [dict(r) for r in good]
    bad[2]["wall_time_s"] = None
    assert "wall_time_s" in expect_error(bad, "3:")
    assert "missing" in expect_error(good[:1] + good[2:], "2:")  # step 3 after step 1
    assert "empty line" in expect_error(good[:2] + [""] + good[2:], "3:")
    bad = [dict(r) for r in good]
    del bad[3]["eval_time_s"]
    assert "eval_time_s" in expect_error(bad, "4:")
    bad = [dict(r) for r in good]
    bad[3]["eval_time_s"] = 0.5  # cumulative: may not decrease
    assert "cumulative" in expect_error(bad, "4:")
    # eval every 2: step 2 lacks eval_accuracy
    bad = [dict(r) for r in good]
    del bad[1]["eval_accuracy"], bad[1]["eval_time_s"]
    assert "no eval_accuracy" in expect_error(bad, "2:", eval_every=2)
    # the last step must be evaluated too (5 steps, eval every 2)
    five = good + [{"step": 5, "wall_time_s": 50.0, "reward_mean": 0.5}]
    assert "last step" in expect_error(five, "5:", eval_every=2)
    assert len(L.load_metrics(os.path.join(write_run(fresh(), good, None), "metrics.jsonl"), 2)) == 4


def test_load_run_reports_metrics_error():
    r = L.load_run(write_run(fresh(), ["not json"], ok_summary(0.3, 0.4)))
    assert not r["ok"] and "metrics.jsonl:1: invalid JSON" in r["error"], r["error"]


# --- the whole driver against a fake asyncrl ----------------------------------------------------

FAKE = r'''#!/usr/bin/python3
import json, os, sys
args = sys.argv[1:]
cmd, cfg = args[0], args[args.index("--config") + 1]
kv = dict(a.split("=", 1) for a in args if "=" in a)
run_dir = kv["runtime.run_dir"]
os.makedirs(run_dir, exist_ok=True)
with open(os.environ["FAKE_LOG"], "a") as f:
    f.write(json.dumps([cmd, os.path.basename(cfg)[:-5], kv.get("runtime.seed")]) + "\n")
if cmd == "sft":
    os.makedirs(os.path.join(run_dir, "final"), exist_ok=True)
    open(os.path.join(run_dir, "final", "model.safetensors"), "w").write("weights")
    sys.exit(0)
mode, seed = os.path.basename(cfg)[:-5], int(kv["runtime.seed"])
if os.environ.get("FAKE_FAIL") == f"{mode}:{seed}":
    json.dump({"ok": False, "error": "fake failure"}, open(os.path.join(run_dir, "summary.json"), "w"))
    print("error: fake failure", file=sys.stderr)
    sys.exit(1)
steps, k = int(kv.get("trainer.total_steps", 8)), int(kv["eval.every_steps"])
speed = {"periodic": 0.05, "sync": 0.02}[mode] * (1 + 0.1 * seed)
acc, ev = 0.375, 0.0
with open(os.path.join(run_dir, "metrics.jsonl"), "w") as f:
    for s in range(1, steps + 1):
        r = {"step": s, "wall_time_s": 2.0 * s + ev, "reward_mean": 0.3 + speed * s}
        if s % k == 0 or s == steps:
            ev += 1.5
            acc = min(1.0, 0.375 + speed * s)
            r.update(eval_accuracy=acc, eval_time_s=ev, wall_time_s=2.0 * s + ev)
        f.write(json.dumps(r) + "\n")
json.dump({"ok": True, "error": "", "steps": steps, "initial_eval_accuracy": 0.375,
           "final_eval_accuracy": acc, "wall_time_s": 2.0 * steps + ev},
          open(os.path.join(run_dir, "summary.json"), "w"))
'''


def run_main(argv, env):
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = L.main(argv)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, out.getvalue(), err.getvalue()


def test_driver_end_to_end():
    d = tempfile.mkdtemp(dir=TMP)
    fake, log = os.path.join(d, "asyncrl"), os.path.join(d, "calls.jsonl")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, 0o755)
    argv = ["--bin", fake, "--modes", "periodic,sync", "--seeds", "1,2", "--eval-every", "2",
            "--out", os.path.join(d, "out"), "--runs-dir", os.path.join(d, "runs"),
            "trainer.total_steps=9"]
    rc, out, err = run_main(argv, {"FAKE_LOG": log, "FAKE_FAIL": "sync:2"})
    assert rc == 1, (rc, err)  # a failed run: exit non-zero, after writing everything
    calls = [json.loads(line) for line in open(log)]
    # sft once, then the mode order rotates from seed to seed
    assert calls == [["sft", "demo", None], ["train", "periodic", "1"], ["train", "sync", "1"],
                     ["train", "sync", "2"], ["train", "periodic", "2"]], calls
    summary = json.loads(out)
    assert summary["failed_runs"] == 1 and summary["modes"]["sync"]["reached"] == "1/2"
    assert abs(summary["target"] - 0.475) < 1e-12
    # periodic seed 1: accuracy 0.375 + 0.055*s reaches 0.475 at the first eval (step 2, 0.485):
    # train wall 4 s (wall 5.5 minus 1.5 s of eval); the run ends at 25.5 - 7.5 = 18 s.
    res = json.load(open(os.path.join(d, "out", "learning.json")))
    p1 = [r for r in res["runs"] if r["mode"] == "periodic" and r["seed"] == 1][0]
    assert p1["time_to_target_s"] == 4.0 and p1["train_wall_s"] == 18.0, p1
    assert p1["curve"][0] == [0.0, 0.375] and len(p1["curve"]) == 1 + 5  # steps 2,4,6,8,9
    assert res["machine"]["nproc"] >= 1 and res["machine"]["arch"]
    assert len(res["commands"]) == 5 and res["commands"][1]["command"][1] == "train"
    assert "eval.every_steps=2" in res["commands"][1]["command"]
    assert "periodic seed 1: 0.375 ->" in err and "sync seed 2: FAILED: exit code 1" in err, err
    md = open(os.path.join(d, "out", "learning.md"), encoding="utf-8").read()
    assert "**periodic** reaches the target accuracy 0.475 first" in md, md
    assert os.path.getsize(os.path.join(d, "out", "learning.png")) > 1000
    # --resume: only the failed run runs again (sft and the finished runs are reused).
    open(log, "w").close()
    rc, out, err = run_main(argv + ["--resume"], {"FAKE_LOG": log, "FAKE_FAIL": ""})
    assert rc == 0, err
    calls = [json.loads(line) for line in open(log)]
    assert calls == [["train", "sync", "2"]], calls
    # Without --resume everything reruns.
    open(log, "w").close()
    rc, out, err = run_main(argv, {"FAKE_LOG": log, "FAKE_FAIL": ""})
    assert rc == 0 and len(open(log).readlines()) == 5
    # A different override: --resume does not reuse runs made with another command.
    open(log, "w").close()
    rc, out, err = run_main(argv[:-1] + ["trainer.total_steps=8", "--resume"],
                            {"FAKE_LOG": log, "FAKE_FAIL": ""})
    assert rc == 0 and len(open(log).readlines()) == 4, open(log).read()


def main():
    tests = [(k, v) for k, v in globals().items() if k.startswith("test_") and callable(v)]
    passed = failed = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
        except Exception:  # noqa: BLE001
            failed += 1
            print(f"FAIL {name}", file=sys.stderr)
            traceback.print_exc()
    if not failed:
        shutil.rmtree(TMP, ignore_errors=True)  # kept on failure, to look at
    else:
        print(f"synthetic runs kept in {TMP}", file=sys.stderr)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

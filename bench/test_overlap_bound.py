#!/usr/bin/python3
"""Self-test of the CPU overlap bounds (bench/e2e.py speed_targets and the helpers it uses, and
bench/summarize.py's target rows) on synthetic e2e results and contention.json contents. The
expected values are computed by hand in the comments, so a swapped c_gen / c_train, a wrong
formula or a bound judged with the run's own contention fails.

    /usr/bin/python3 bench/test_overlap_bound.py

Prints "N passed, 0 failed" and exits 0, or prints each failure and exits 1.
"""
import os
import shutil
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import e2e as E  # noqa: E402
import summarize as S  # noqa: E402

TOL = 1e-6


def near(a, b, tol=TOL):
    assert a is not None and abs(a - b) <= tol, f"{a} != {b}"


def contention_json(none=(1.02, 1.21), roles=(0.98, 0.95)):
    """bench_contention's output, the keys e2e.py reads: (contention_gen, contention_train)."""
    mk = lambda g, t: {"contention_gen": g, "contention_train": t, "contention": (g + t) / 2}  # noqa: E731
    return {"benchmark": "contention", "modes": {"none": mk(*none), "roles": mk(*roles)}}


def sd(step_s, t_gen, t_train):
    return {"step_s": step_s, "t_gen_s": t_gen, "t_train_s": t_train, "c_gen": 1.0, "c_train": 1.0}


def result(balanced=None, long_tail=None):
    """e2e.json's "workloads" with the modes the targets read."""
    wls = {}
    if balanced:
        wls["balanced"] = {"modes": balanced}
    if long_tail:
        wls["long_tail"] = {"modes": long_tail}
    return {"workloads": wls}


def issue_machine():
    """Issue 26's 2-vCPU Intel run: T_gen 0.71 s, T_train 1.27 s; periodic 1.17x over
    sync_decoupled with its own c_gen 1.17, c_train 1.40. sync_decoupled's measured step (2.10 s)
    is above T_gen + T_train (1.98 s): the bound must use the sum, not the step."""
    return result(balanced={
        "sync_decoupled": sd(2.10, 0.71, 1.27),
        "periodic": {"step_s": 2.10 / 1.17, "c_gen": 1.17, "c_train": 1.40}})


def test_self_bound_exceeded_independent_not():
    ind = E.independent_contention(contention_json(), "none")
    assert ind == {"c_gen": 1.02, "c_train": 1.21, "source": "bench_contention, mode none"}, ind
    t = E.speed_targets(issue_machine(), ind)["periodic_vs_sync_decoupled"]
    near(t["measured"], 1.17)
    # self: 1.98 / max(1.17 * 0.71, 1.40 * 1.27) = 1.98 / max(0.8307, 1.778) = 1.1136108
    near(t["bound_self"], 1.1136108, 1e-6)
    near(t["share_of_bound_self"], 1.0506364, 1e-6)  # exceeded: 105%
    # independent: 1.98 / max(1.02 * 0.71, 1.21 * 1.27) = 1.98 / max(0.7242, 1.5367) = 1.2884753
    near(t["bound"], 1.2884753, 1e-6)
    near(t["share_of_bound"], 0.90805, 1e-6)  # not exceeded: 91%
    # ceiling (c = 1): 1.98 / 1.27 = 1.5590551
    near(t["ceiling"], 1.5590551, 1e-6)
    near(t["share_of_ceiling"], 1.17 / 1.5590551, 1e-6)
    near(t["T_gen_s"], 0.71)
    near(t["T_train_s"], 1.27)
    near(t["T_train_over_T_gen"], 1.27 / 0.71)
    near(t["base_step_s"], 1.98)
    assert (t["c_gen"], t["c_train"], t["c_gen_self"], t["c_train_self"]) == (1.02, 1.21, 1.17, 1.40)
    assert t["met"] is False  # 1.17 < 1.6
    # Swapped factors would give 1.98 / max(1.21 * 0.71, 1.02 * 1.27) = 1.5284854 (independent)
    # and 1.98 / max(1.40 * 0.71, 1.17 * 1.27) = 1.3325257 (self): make sure those are not it.
    assert abs(t["bound"] - 1.5284854) > 0.1 and abs(t["bound_self"] - 1.3325257) > 0.1


def test_colocated_sync_bound_generation_limited():
    # long tail, generation the longer phase: T_gen 0.90, T_train 0.50; colocated sync 1.60 s/step,
    # fully_async_partial 1.60 / 1.55 s/step; independent c_gen 1.02, c_train 1.21.
    r = result(long_tail={
        "sync": {"step_s": 1.60, "c_gen": 1.0, "c_train": 1.0},
        "sync_decoupled": sd(1.45, 0.90, 0.50),
        "fully_async_partial": {"step_s": 1.60 / 1.55, "c_gen": 1.30, "c_train": 1.05}})
    t = E.speed_targets(r, E.independent_contention(contention_json(), "none"))["fully_async_partial_vs_sync"]
    near(t["measured"], 1.55)
    # 1.60 / max(1.02 * 0.90, 1.21 * 0.50) = 1.60 / 0.918 = 1.7429194 (swapped: 1.60 / 1.089 = 1.469)
    near(t["bound"], 1.7429194, 1e-6)
    # self: 1.60 / max(1.30 * 0.90, 1.05 * 0.50) = 1.60 / 1.17 = 1.3675214
    near(t["bound_self"], 1.3675214, 1e-6)
    near(t["ceiling"], 1.60 / 0.90)  # 1.7777778
    near(t["base_step_s"], 1.60)
    assert t["met"] is False  # 1.55 < 2.0, no share-of-bound part
    assert "step_s(sync)" in t["bound_formula"]


def test_share_of_bound_judged_against_independent_bound():
    # T_gen = T_train = 0.5, base 1.0; independent c = 1 -> bound 2.0; the run's own c_train 1.1
    # -> self bound 1 / 0.55 = 1.8181818. 1.70x: >= 1.6 and >= 90% of the self bound (1.636),
    # but < 90% of the bound (1.8): not met. 1.85x: met.
    ind = E.independent_contention(contention_json(none=(1.0, 1.0)), "none")
    for speedup, met in ((1.70, False), (1.85, True)):
        r = result(balanced={"sync_decoupled": sd(1.0, 0.5, 0.5),
                             "periodic": {"step_s": 1.0 / speedup, "c_gen": 1.0, "c_train": 1.1}})
        t = E.speed_targets(r, ind)["periodic_vs_sync_decoupled"]
        near(t["bound"], 2.0)
        near(t["bound_self"], 1.8181818, 1e-6)
        assert t["met"] is met, (speedup, t)


def test_missing_contention_is_said_not_filled_in():
    miss = E.independent_contention(None, "none")
    assert "absent" in miss["missing"], miss
    t = E.speed_targets(issue_machine(), miss)["periodic_vs_sync_decoupled"]
    assert t["bound"] is None and t["share_of_bound"] is None and t["c_gen"] is None
    assert t["contention_missing"] == miss["missing"]
    near(t["bound_self"], 1.1136108, 1e-6)  # still reported, as the self bound
    assert t["met"] is False  # 1.17 < 1.6 fails whatever the bound
    # Above 1.6x the share of the bound decides, and there is none: not judged (None).
    r = result(balanced={"sync_decoupled": sd(1.0, 0.5, 0.5),
                         "periodic": {"step_s": 1.0 / 1.7, "c_gen": 1.0, "c_train": 1.0}})
    t = E.speed_targets(r, miss)["periodic_vs_sync_decoupled"]
    assert t["met"] is None, t
    row = S.target_rows({"e2e": {"targets": {"p": t}}})[0]
    assert "bound not measured: contention.json absent" in row[3], row
    assert "not judged" in row[4], row
    assert "self bound 2.00x" in row[3], row


def test_stale_or_wrong_mode_contention_is_refused():
    cb = contention_json()
    assert "not from this suite run" in E.independent_contention(cb, "none", age_s=2 * 3600)["missing"]
    assert "after" in E.independent_contention(cb, "none", age_s=-600)["missing"]
    assert "c_gen" in E.independent_contention(cb, "none", age_s=120)
    # the mode of the runs' runtime.affinity, and only that one
    roles = E.independent_contention(cb, "roles")
    assert (roles["c_gen"], roles["c_train"]) == (0.98, 0.95), roles
    del cb["modes"]["roles"]
    assert "no mode 'roles'" in E.independent_contention(cb, "roles")["missing"]


def test_affinity_of_overrides():
    assert E.affinity_of([]) == "none"
    assert E.affinity_of(["trainer.x=1", "runtime.affinity=roles"]) == "roles"
    assert E.affinity_of(["runtime.affinity=roles", "runtime.affinity = none"]) == "none"


def test_contention_age_from_run_files():
    d = tempfile.mkdtemp(prefix="overlap-bound-test-")
    cpath = os.path.join(d, "contention.json")
    open(cpath, "w").close()
    runs = []
    now = time.time()
    for i, end in enumerate((now - 100, now - 50)):
        rd = os.path.join(d, f"run{i}")
        os.makedirs(rd)
        m = os.path.join(rd, "metrics.jsonl")
        open(m, "w").close()
        os.utime(m, (end, end))
        runs.append(rd)
    os.utime(cpath, (now - 400, now - 400))
    near(E.contention_age_s(cpath, runs), 300, 1e-3)  # to the first run's end
    assert E.contention_age_s(os.path.join(d, "none.json"), runs) is None
    shutil.rmtree(d)


def test_overlap_note_names_the_balance():
    t = E.speed_targets(issue_machine(), E.independent_contention(contention_json(), "none"))
    note = t["periodic_vs_sync_decoupled"]["overlap_note"]
    for part in ("T_gen 0.710 s, T_train 1.270 s", "training is 1.79x as long as generation",
                 "hide generation", "at least T_train (1.270 s)", "at most 1.56x over sync_decoupled",
                 "1.29x with bench_contention's factors"):
        assert part in note, (part, note)
    r = result(balanced={"sync_decoupled": sd(1.0, 0.6, 0.3),
                         "periodic": {"step_s": 0.8, "c_gen": 1.0, "c_train": 1.0}})
    note = E.speed_targets(r, {"missing": "x"})["periodic_vs_sync_decoupled"]["overlap_note"]
    assert "generation is 2.00x as long as training" in note and "hide training" in note, note
    assert "bench_contention" not in note, note


def test_summary_rows_and_section():
    e2e = issue_machine()
    e2e["targets"] = E.speed_targets(e2e, E.independent_contention(contention_json(), "none"))
    row = S.target_rows({"e2e": e2e})[0]
    assert row[0] == "periodic / sync_decoupled, balanced", row
    assert row[2].startswith("1.17x (90.8% of bound; 105% of self bound; 75% of ceiling)"), row
    assert "bound 1.29x with bench_contention's c_gen 1.02, c_train 1.21" in row[3], row
    assert "self bound 1.11x with the judged run's own c_gen 1.17, c_train 1.40" in row[3], row
    assert "ceiling 1.56x" in row[3] and "T_train / T_gen 1.79" in row[3], row
    assert row[4] == "**not met**", row
    md = "\n".join(S.targets_section({"e2e": e2e}))
    assert "- periodic / sync_decoupled, balanced: T_gen 0.710 s" in md, md


def test_summary_recomputes_an_old_e2e_json():
    # An e2e.json written before this change: targets with the self bound only, under "bound".
    e2e = issue_machine()
    e2e["targets"] = {"periodic_vs_sync_decoupled": {"bound": 1.11, "c_gen": 1.17, "c_train": 1.40}}
    e2e["contention_bench"] = contention_json()
    t = S.speed_targets(e2e)["periodic_vs_sync_decoupled"]
    assert t["recomputed"]
    near(t["bound"], 1.2884753, 1e-6)
    near(t["bound_self"], 1.1136108, 1e-6)
    del e2e["contention_bench"]
    t = S.speed_targets(e2e)["periodic_vs_sync_decoupled"]
    assert t["bound"] is None and "absent" in t["contention_missing"], t


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
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

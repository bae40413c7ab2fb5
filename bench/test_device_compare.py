#!/usr/bin/env python3
"""The device benchmark's CPU mode, end to end (ctest bench_device_compare_cpu): runs
bench/device_compare.py on the small shape and checks what it prints. Catches a driver that
cannot parse a part's output, a missing row (a precision, an objective, a dtype), a ratio taken
the wrong way round or against the wrong row, an end-to-end run whose metrics changed names, and
a bf16 run whose mismatch metrics are missing or out of range. Also: the JSON written after each
part (--out: it exists and parses while later parts still run, and no temporary file is left),
the labelled reference rows (plain, fused AdamW, torch.compile, static-cache generate; a compiled
row may carry an error instead, never abort the run), the new ratios, and the issue-41 targets.

  bench/test_device_compare.py BUILD_DIR [REFERENCE_PYTHON]
REFERENCE_PYTHON (or $ASYNCRL_REFERENCE_PYTHON) has torch and transformers; without one the
reference part must say why it was skipped.
"""
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def main():
    build = sys.argv[1]
    python = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("ASYNCRL_REFERENCE_PYTHON", "")
    with tempfile.TemporaryDirectory(prefix="test_device_compare.") as tmp:
        out_path = os.path.join(tmp, "device_compare.json")
        cmd = [sys.executable, os.path.join(HERE, "device_compare.py"), "--device", "cpu", "--build", build,
               "--python", python, "--e2e-steps", "4", "--timeout", "600", "--markdown", "--out", out_path]
        text, snapshots = run_watching(cmd, out_path)
        res = json.loads(text[: text.rindex("\n}") + 2])
        check(json.load(open(out_path)) == res, "the --out file differs from the printed JSON")
        check(sorted(os.listdir(tmp)) == ["device_compare.json"] + (["device_compare.json.reference.json"] if python else []),
              f"files left beside --out: {sorted(os.listdir(tmp))}")
    check_incremental(snapshots, res)
    ours = res["asyncrl"]
    check(ours["device"] == "cpu" and ours["shape"]["name"] == "small", "shape/device")
    rows = {(r["precision"], r["objective"]): r for r in ours["trainer"]}
    check(set(rows) == {(p, o) for p in ("float32", "bf16") for o in ("rl", "policy_only")},
          f"trainer rows {sorted(rows)}")
    for k, r in rows.items():
        check(r["tokens_per_s"] > 0 and r["model_tflops"] > 0 and r["mfu_vs_bf16_peak"] > 0, f"trainer {k}: {r}")
        want = ours["batch"] * (ours["prompt_tokens"] + ours["new_tokens"]) / r["step_s"]
        check(abs(r["tokens_per_s"] - want) <= 1e-9 * want, f"trainer {k}: tokens/s is not tokens / step_s")
    gens = {r["dtype"]: r for r in ours["generation"]}
    check(set(gens) == {"float32", "bf16"}, f"generation rows {sorted(gens)}")
    for d, r in gens.items():
        check(r["tokens_per_s"] > 0, f"generation {d}")
    check(ours["matmul_peak_tflops"]["bf16"] > 0, "no bf16 matmul peak")

    ref = res.get("reference")
    ratios = res["ratios"]
    if python:
        check(ref is not None, f"reference failed: {res.get('reference_error')}")
        check(ref.get("done") is True and ref["vocab"] == ours["shape"]["vocab_size"],
              f"reference: done {ref.get('done')}, vocab {ref.get('vocab')}")
        for r in ref["train"] + ref["generate"]:
            check(r.get("label") and r.get("variant") and r.get("vocab") == ref["vocab"], f"unlabelled row {r}")
        eager_t = [r for r in ref["train"] if r["variant"] == "eager"]
        eager_g = [r for r in ref["generate"] if r["variant"] == "eager"]
        rt = {r["precision"]: r for r in eager_t}
        rg = {r["dtype"]: r for r in eager_g}
        check(len(rt) == len(eager_t) == 2 and set(rt) == {"float32", "bf16_autocast"} and
              len(rg) == len(eager_g) == 2 and set(rg) == {"float32", "bf16"},
              f"reference rows {sorted(rt)} {sorted(rg)}")
        strong_t = {r["variant"]: r for r in ref["train"] if r["variant"] != "eager"}
        strong_g = {r["variant"]: r for r in ref["generate"] if r["variant"] != "eager"}
        check(set(strong_t) == {"fused", "fused_compiled"} and set(strong_g) == {"static_compiled"},
              f"strong reference rows {sorted(strong_t)} {sorted(strong_g)}")
        for r in list(rt.values()) + list(rg.values()) + [strong_t["fused"]]:
            check("error" not in r and r["tokens_per_s"] > 0, f"reference row {r}")
            check(r.get("attn_implementation") and r.get("sdpa_backend"), f"no attention recorded: {r}")
        check(strong_t["fused"]["optimizer"] == "AdamW(fused=True)", "fused row without fused AdamW")
        # torch.compile may be missing on a machine (no compiler): then the row says why.
        for r in (strong_t["fused_compiled"], strong_g["static_compiled"]):
            check(("error" in r and r["error"]) or (r["tokens_per_s"] > 0 and r["torch_compile"]),
                  f"compiled row: {r}")
            if "error" in r:
                print(f"note: {r['label']}: {r['error'][:200]}")
        check(strong_g["static_compiled"].get("cache") == "static" or "error" in strong_g["static_compiled"],
              "static_compiled row without a static cache")
        sweep = ref["matmul_peak_tflops"]["sweep"]
        check(sweep and ref["matmul_peak_tflops"]["bf16"] == max(r["bf16"] for r in sweep), "reference peak sweep")
        expect = {
            "trainer_policy_only_float32_vs_torch_float32":
                rows[("float32", "policy_only")]["tokens_per_s"] / rt["float32"]["tokens_per_s"],
            "trainer_policy_only_bf16_vs_torch_bf16":
                rows[("bf16", "policy_only")]["tokens_per_s"] / rt["bf16_autocast"]["tokens_per_s"],
            "trainer_rl_bf16_vs_torch_bf16":
                rows[("bf16", "rl")]["tokens_per_s"] / rt["bf16_autocast"]["tokens_per_s"],
            "generation_float32_vs_hf_float32": gens["float32"]["tokens_per_s"] / rg["float32"]["tokens_per_s"],
            "generation_bf16_vs_hf_bf16": gens["bf16"]["tokens_per_s"] / rg["bf16"]["tokens_per_s"],
        }
        expect["trainer_policy_only_bf16_vs_torch_fused"] = (
            rows[("bf16", "policy_only")]["tokens_per_s"] / strong_t["fused"]["tokens_per_s"])
        if "error" not in strong_t["fused_compiled"]:
            expect["trainer_policy_only_bf16_vs_torch_fused_compiled"] = (
                rows[("bf16", "policy_only")]["tokens_per_s"] / strong_t["fused_compiled"]["tokens_per_s"])
        if "error" not in strong_g["static_compiled"]:
            expect["generation_bf16_vs_hf_static_compiled"] = (
                gens["bf16"]["tokens_per_s"] / strong_g["static_compiled"]["tokens_per_s"])
        for k, v in expect.items():
            check(ratios.get(k) is not None and abs(ratios[k] - v) <= 1e-9 * v, f"ratio {k}: {ratios.get(k)} != {v}")
    else:
        check(ref is None and res.get("reference_skipped"), "a skipped reference must say why")

    e2e = res["e2e"]
    check(e2e and "error" not in e2e, f"e2e: {e2e}")
    check(e2e["steps"] == 4 and e2e["precision"] == "bf16", f"e2e run: {e2e}")
    for k in ("trainer_tokens_per_s_busy", "rollouter_tokens_per_s_busy", "tokens_generated_per_s_wall"):
        check(e2e[k] and e2e[k] > 0, f"e2e {k}: {e2e[k]}")
    # The metrics are there and bounded (bf16 against bf16 may agree exactly: see test_bf16.cpp).
    check(e2e["mismatch_tokens"] > 0, f"bf16 e2e: no token compared ({e2e['mismatch_tokens']})")
    check(0 <= e2e["mismatch_abs_mean"] <= e2e["mismatch_abs_max"] < 0.5,
          f"bf16 e2e mismatch mean {e2e['mismatch_abs_mean']} max {e2e['mismatch_abs_max']}")
    check("| asyncrl trainer, policy_only, bf16 |" in text, "markdown table missing")
    # The e2e trainer against its own rl row, per FLOP: 8 N (demo.yaml: no old-policy forward) / 10 N.
    check(e2e["flops_per_token_per_parameter"] == 8, f"e2e FLOPs per token: {e2e['flops_per_token_per_parameter']}")
    want = e2e["trainer_tokens_per_s_busy"] * 8 / (rows[("bf16", "rl")]["tokens_per_s"] * 10)
    got = ratios.get("e2e_trainer_vs_own_rl_per_flop")
    check(got is not None and abs(got - want) <= 1e-9 * want, f"e2e per-FLOP ratio {got} != {want}")
    for (prec, obj), r in rows.items():
        check(r["flops_per_token_per_parameter"] == (6 if obj == "policy_only" else 10), f"FLOPs count of {obj}")
    sweep = ours["matmul_peak_tflops"]["sweep"]
    check(sweep and ours["matmul_peak_tflops"]["bf16"] == max(r["bf16"] for r in sweep), "asyncrl peak sweep")
    check_targets(res, gens["bf16"])
    check_target_logic()
    check("| target (issue 41) |" in text, "targets table missing")
    check_op_counts(ours)
    print("ok: device_compare CPU mode", "with" if python else "without", "the reference")


def run_watching(cmd, out_path):
    """Runs cmd, reading out_path whenever it changes: returns (stdout, the parsed snapshots)."""
    snapshots, seen = [], None
    with tempfile.TemporaryFile("w+") as so, tempfile.TemporaryFile("w+") as se:
        p = subprocess.Popen(cmd, stdout=so, stderr=se, text=True)
        deadline = time.monotonic() + 1500
        while True:
            done = p.poll() is not None
            try:
                st = os.stat(out_path)
                key = (st.st_mtime_ns, st.st_size, st.st_ino)
                if key != seen:
                    seen = key
                    with open(out_path) as f:
                        body = f.read()
                    try:  # written by rename: never a half-written file
                        snapshots.append(json.loads(body))
                    except json.JSONDecodeError as e:
                        fail(f"{out_path} does not parse mid-run ({e}): a write that is not atomic")
            except FileNotFoundError:
                pass
            if done:
                break
            if time.monotonic() > deadline:
                p.kill()
                fail("device_compare.py did not finish in 1500 s")
            time.sleep(0.05)
        so.seek(0)
        se.seek(0)
        out, err = so.read(), se.read()
    check(p.returncode == 0, f"exit {p.returncode}: {err[-2000:]}")
    return out, snapshots


def check_incremental(snapshots, res):
    """The JSON is there after the first part, while the others still run; parts only grow."""
    check(res["parts_done"] == res["parts"] == ["asyncrl", "reference", "e2e"],
          f"parts {res['parts']} done {res['parts_done']}")
    check(snapshots, "no --out file seen")
    # The first seen is before the end-to-end run (the last part, seconds long) has finished;
    # without a reference Python the skipped reference part may already be in it.
    first = snapshots[0]
    check(first["parts_done"][:1] == ["asyncrl"] and first["asyncrl"] is not None and
          "e2e" not in first["parts_done"] and first["e2e"] is None,
          f"first snapshot: parts done {first['parts_done']}")
    done = [s["parts_done"] for s in snapshots]
    for a, b in zip(done, done[1:]):
        check(b[:len(a)] == a, f"parts_done went from {a} to {b}")


def check_targets(res, gen_bf16):
    t = {x["target"]: x for x in res["targets"]}
    check(set(t) == {"trainer_vs_compiled_step", "generation_vs_static_compiled", "decode_step_ms",
                     "big_mfu_checkpointing"}, f"targets {sorted(t)}")
    # The CPU's small shape is not the targets' shape: measured where possible, never judged.
    for x in t.values():
        check(x["pass"] is None and x["goal"], f"target judged on the CPU shape: {x}")
    want = gen_bf16["s"] * 1e3 / (gen_bf16["decode_steps_all_runs"] / gen_bf16["runs"])
    got = t["decode_step_ms"]["value"]
    check(got is not None and abs(got - want) <= 1e-9 * want, f"decode step {got} ms != {want}")
    check(t["trainer_vs_compiled_step"]["value"] == res["ratios"].get("trainer_policy_only_bf16_vs_torch_fused_compiled"),
          "trainer target is not the compiled-step ratio")


def check_target_logic():
    """The pass/miss rules on a made-up CUDA result (the CPU run never judges them)."""
    sys.path.insert(0, HERE)
    import device_compare as dc
    gen = {"dtype": "bf16", "s": 0.06, "decode_steps_all_runs": 144, "runs": 3, "tokens_per_s": 1.0}
    res = {"device": "cuda", "asyncrl": {"shape": {"name": "qwen2.5-0.5b"}, "batch": 128, "generation": [gen],
                                         "matmul_peak_tflops": {"bf16": 700.0}},
           "reference": {"matmul_peak_tflops": {"bf16": 800.0}},
           "ratios": {"trainer_policy_only_bf16_vs_torch_fused_compiled": 0.99,
                      "generation_bf16_vs_hf_static_compiled": 2.0},
           "big": {"checkpointing": {"trainer": [{"objective": "rl", "model_tflops": 280.0}]}}}
    t = {x["target"]: x for x in dc.targets(res)}
    check(t["trainer_vs_compiled_step"]["pass"] is False, "0.99x passed the >= 1x trainer target")
    check(t["generation_vs_static_compiled"]["pass"] is True, "2.0x missed the >= 2x generation target")
    # 0.06 s over 48 decode steps a run: 1.25 ms.
    check(abs(t["decode_step_ms"]["value"] - 1.25) < 1e-9 and t["decode_step_ms"]["pass"] is True, "decode step")
    # 280 / max(700, 800) = 35%: MFU against the best peak either side measured.
    check(abs(t["big_mfu_checkpointing"]["value"] - 0.35) < 1e-9 and t["big_mfu_checkpointing"]["pass"] is True,
          f"1.5B MFU {t['big_mfu_checkpointing']}")
    res["asyncrl"]["batch"] = 64
    check(all(x["pass"] is None for x in dc.targets(res) if x["target"] != "big_mfu_checkpointing"),
          "targets judged at batch 64")


# The CPU proxy of kernel launches: ATen operators dispatched per trained and per generated
# token at the small shape, against the counts kept in bench/results/aten_ops_cpu.json (same
# libtorch version only: another version dispatches other internals). Deterministic, so a
# change that multiplies the operators (a per-parameter loop, a micro-batch split, a host
# round trip per token) fails here without a GPU. Allowed: 1.25x the kept count.
def check_op_counts(ours):
    kept_path = os.path.join(HERE, "results", "aten_ops_cpu.json")
    kept = json.load(open(kept_path))
    now = {f"trainer/{r['precision']}/{r['objective']}": r["aten_ops_per_token"] for r in ours["trainer"]}
    now.update({f"generation/{r['dtype']}": r["aten_ops_per_token"] for r in ours["generation"]})
    for k, v in now.items():
        check(v is not None and v > 0, f"no ATen operator count for {k}")
    if kept["libtorch"] != ours["libtorch"]:
        print(f"note: ATen op counts not compared: kept for libtorch {kept['libtorch']}, "
              f"this build has {ours['libtorch']}")
        return
    # bf16 matmuls dispatch other operators with and without oneDNN (AVX512): a count per class.
    check("cpu_bf16_gemm_onednn" in ours, "bench_device_throughput does not say how bf16 matmuls run")
    which = "small" if ours["cpu_bf16_gemm_onednn"] else "small_without_avx512"
    check(which in kept, f"no ATen op counts kept for {which} in {kept_path}")
    print(f"ATen op counts compared with {which}")
    for k, want in kept[which].items():
        check(k in now, f"ATen op count {k} missing")
        print(f"ATen ops per token {k}: {now[k]:.2f} (kept {want:.2f})")
        check(now[k] <= 1.25 * want, f"ATen ops per token {k}: {now[k]:.2f}, more than 1.25x the kept "
              f"{want:.2f} (bench/results/aten_ops_cpu.json, {which}): a change multiplied the operators")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The device benchmark's CPU mode, end to end (ctest bench_device_compare_cpu): runs
bench/device_compare.py on the small shape and checks what it prints. Catches a driver that
cannot parse a part's output, a missing row (a precision, an objective, a dtype), a ratio taken
the wrong way round or against the wrong row, an end-to-end run whose metrics changed names, and
a bf16 run whose mismatch metrics are missing or out of range.

  bench/test_device_compare.py BUILD_DIR [REFERENCE_PYTHON]
REFERENCE_PYTHON (or $ASYNCRL_REFERENCE_PYTHON) has torch and transformers; without one the
reference part must say why it was skipped.
"""
import json
import os
import subprocess
import sys

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
    cmd = [sys.executable, os.path.join(HERE, "device_compare.py"), "--device", "cpu", "--build", build,
           "--python", python, "--e2e-steps", "4", "--timeout", "600", "--markdown"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    check(p.returncode == 0, f"exit {p.returncode}: {p.stderr[-2000:]}")
    text = p.stdout
    res = json.loads(text[: text.rindex("\n}") + 2])
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
        rt = {r["precision"]: r for r in ref["train"]}
        rg = {r["dtype"]: r for r in ref["generate"]}
        check(set(rt) == {"float32", "bf16_autocast"} and set(rg) == {"float32", "bf16"},
              f"reference rows {sorted(rt)} {sorted(rg)}")
        for r in list(rt.values()) + list(rg.values()):
            check("error" not in r and r["tokens_per_s"] > 0, f"reference row {r}")
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
        for k, v in expect.items():
            check(abs(ratios[k] - v) <= 1e-9 * v, f"ratio {k}: {ratios[k]} != {v}")
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
    check_op_counts(ours)
    print("ok: device_compare CPU mode", "with" if python else "without", "the reference")


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

#!/usr/bin/env python3
"""asyncrl next to plain PyTorch and HF generate(), on one device, in one job; prints one JSON.

Runs, on the device given (default: cuda when the reference Python sees one, else cpu):
  1. build/bench/bench_device_throughput: asyncrl's trainer step (float32 and bf16 mixed
     precision; the policy-only step and the default RL step) and its generation (float32 and
     bf16 rollouts), at the shape and batch below;
  2. bench/torch_reference.py with --python (needs torch and transformers): a plain PyTorch
     training step of HF's Qwen2 with the same shape and batch (float32, bf16 autocast), HF
     generate() at the same batch and lengths (float32, bf16), and the bf16 matmul peak;
  3. an end-to-end fully async `asyncrl train` of the same shape from a fresh model (the demo's
     config, bf16 rollouts and bf16 trainer unless --e2e-precision float32), whose trainer
     tokens/s (busy time) and rollouter tokens/s (from its idle ratio) come from metrics.jsonl.
Then the ratios (asyncrl / reference, same precision), MFU against the measured bf16 matmul peak,
and peak memory. --markdown also prints the table docs/benchmarks.md keeps.

  python3 bench/device_compare.py --device cuda --python python3 --out bench/results/device.json
  python3 bench/device_compare.py --device cpu                        # the small CPU shape (CI)

Shapes: qwen2.5-0.5b (hidden 896, 24 layers, 14/2 heads, MLP 4864, vocab 100, tied: the body of
Qwen2.5-0.5B) at batch 128 x (16 + 48) tokens on CUDA; small (hidden 64, 2 layers) at batch
8 x (8 + 8) on the CPU. The end-to-end run uses the built-in char vocabulary and arithmetic task.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHAPES = {
    "qwen2.5-0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864),
    "small": dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=192),
}


def run_json(cmd, timeout):
    """Runs cmd, returns (json or None, error text)."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: {' '.join(cmd)}"
    except OSError as e:
        return None, f"{cmd[0]}: {e}"
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {(p.stderr or p.stdout)[-1500:]}"
    # The JSON object is the output's last top-level {...}.
    start = p.stdout.find("\n{")
    text = p.stdout[start + 1:] if start >= 0 else p.stdout
    try:
        return json.loads(text), ""
    except json.JSONDecodeError as e:
        return None, f"unparsable output ({e}): {p.stdout[-500:]}"


def reference_available(python):
    try:
        p = subprocess.run([python, "-c", "import torch, transformers; "
                            "print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)
    if p.returncode != 0:
        return None, p.stderr.strip().splitlines()[-1] if p.stderr.strip() else "import failed"
    return p.stdout.strip() == "True", ""


def e2e_run(args, shape, workdir, extra=()):
    """A fully async run of the shape; trainer and rollouter tokens/s from its metrics. `extra`:
    more config overrides (bench/e2e_probe.py's variants)."""
    s = SHAPES[shape]
    run_dir = os.path.join(workdir, "e2e")
    prec = args.e2e_precision
    cmd = [os.path.join(args.build, "asyncrl"), "train", "-c", os.path.join(ROOT, "configs/demo.yaml"),
           f"runtime.run_dir={run_dir}", f"runtime.device={args.device}",
           f"model.init.hidden_size={s['hidden']}", f"model.init.num_hidden_layers={s['layers']}",
           f"model.init.num_attention_heads={s['heads']}",
           f"model.init.num_key_value_heads={s['kv_heads']}",
           f"model.init.intermediate_size={s['intermediate']}",
           f"rollout.max_new_tokens={args.new_tokens}", f"eval.max_new_tokens={args.new_tokens}",
           f"data.train_batch_size={args.batch // 8}", "rollout.n=8",
           f"trainer.ppo_mini_batch_size={args.batch // 8}",
           f"trainer.total_steps={args.e2e_steps}", "trainer.warmup_steps=0",
           "runtime.eval_before=false", "runtime.eval_after=false", "checkpoint.every_steps=0",
           "runtime.log_level=warn",
           f"rollout.dtype={prec}", f"trainer.precision={prec}",
           f"trainer.micro_batch_tokens={args.micro_batch_tokens}", "rollout.chunk_tokens=16"] + list(extra)
    watch = GpuBusyWatch(os.path.join(run_dir, "metrics.jsonl")) if args.device.startswith("cuda") else None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout} s", "command": " ".join(cmd)}
    finally:
        if watch:
            watch.stop()
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {p.stderr[-1500:]}", "command": " ".join(cmd)}
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    # The first steps build the pipeline (first prompts, allocator warm-up): left out.
    steady = rows[min(2, len(rows) - 1):]
    busy = sum(r["step_time_s"] * (1 - r["trainer_idle_ratio"]) for r in steady)
    wall = sum(r["step_time_s"] for r in steady)
    processed = sum(r["tokens_processed"] for r in steady)
    # tokens_generated is per step (the tokens the rollouters produced during it).
    gen_tokens = sum(r["tokens_generated"] for r in steady)
    r_busy = sum(r["step_time_s"] * (1 - r["rollouter_idle_ratio"]) for r in steady)
    return {
        "precision": prec, "steps": len(rows), "steady_steps": len(steady),
        "trainer_tokens_per_s_busy": processed / busy if busy > 0 else None,
        "trainer_tokens_per_s_wall": processed / wall if wall > 0 else None,
        "trainer_idle_ratio": sum(r["trainer_idle_ratio"] * r["step_time_s"] for r in steady) / wall,
        "rollouter_tokens_per_s_busy": gen_tokens / r_busy if r_busy > 0 else None,
        "rollouter_idle_ratio": sum(r["rollouter_idle_ratio"] * r["step_time_s"] for r in steady) / wall,
        "tokens_generated_per_s_wall": gen_tokens / wall if wall > 0 else None,
        "mismatch_abs_mean": sum(r["mismatch_abs_mean"] for r in steady) / len(steady),
        "mismatch_abs_max": max(r["mismatch_abs_max"] for r in steady),
        "mismatch_tokens": sum(r["mismatch_tokens"] for r in steady),
        "command": " ".join(cmd),
        # nvidia-smi's utilization.gpu (share of each sample period with a kernel running),
        # averaged over the steady steps (rows[2:]: from the 2nd line's appearance to the last's).
        "gpu_busy": watch.busy(steady_from=min(2, len(rows) - 1)) if watch else None,
    }


class GpuBusyWatch:
    """Samples nvidia-smi's GPU utilization every 100 ms and notes when each metrics.jsonl line
    appears (host clock), so the busy share can be taken over the steady steps only."""

    def __init__(self, metrics_path):
        self.metrics_path, self.samples, self.lines_at = metrics_path, [], []
        self.proc = None
        if shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "--query-gpu=utilization.gpu",
                                          "--format=csv,noheader,nounits", "-lms", "100"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            threading.Thread(target=self._read, daemon=True).start()
        self.done = threading.Event()
        threading.Thread(target=self._poll, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                self.samples.append((time.monotonic(), float(line.split(",")[0])))
            except ValueError:
                pass

    def _poll(self):
        while not self.done.wait(0.05):
            try:
                with open(self.metrics_path) as f:
                    n = sum(1 for _ in f)
            except OSError:
                continue
            while len(self.lines_at) < n:
                self.lines_at.append(time.monotonic())

    def stop(self):
        self.done.set()
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def busy(self, steady_from):
        """Mean utilization over the steps of rows[steady_from:]: a step's time runs from the
        line before it to its own line."""
        start = max(steady_from - 1, 0)
        if not self.samples or len(self.lines_at) <= start + 1:
            return {"error": "no samples" if not self.samples else "too few metrics lines seen"}
        t0, t1 = self.lines_at[start], self.lines_at[-1]
        inside = [u for t, u in self.samples if t0 <= t <= t1]
        return {"mean_percent": sum(inside) / len(inside) if inside else None,
                "samples": len(inside), "window_s": t1 - t0,
                "whole_run_mean_percent": sum(u for _, u in self.samples) / len(self.samples)}


def pick(rows, **match):
    for r in rows:
        if all(r.get(k) == v for k, v in match.items()):
            return r
    return None


def ratio(a, b):
    if not a or not b or "tokens_per_s" not in a or "tokens_per_s" not in b:
        return None
    return a["tokens_per_s"] / b["tokens_per_s"]


def compare(ours, ref, e2e):
    t, g = ours["trainer"], ours["generation"]
    out = {}
    if ref:
        rt, rg = ref.get("train", []), ref.get("generate", [])
        out["trainer_policy_only_float32_vs_torch_float32"] = ratio(
            pick(t, precision="float32", objective="policy_only"), pick(rt, precision="float32"))
        out["trainer_policy_only_bf16_vs_torch_bf16"] = ratio(
            pick(t, precision="bf16", objective="policy_only"), pick(rt, precision="bf16_autocast"))
        out["trainer_rl_bf16_vs_torch_bf16"] = ratio(
            pick(t, precision="bf16", objective="rl"), pick(rt, precision="bf16_autocast"))
        out["generation_float32_vs_hf_float32"] = ratio(pick(g, dtype="float32"),
                                                        pick(rg, dtype="float32"))
        out["generation_bf16_vs_hf_bf16"] = ratio(pick(g, dtype="bf16"), pick(rg, dtype="bf16"))
        tb = pick(rt, precision="bf16_autocast")
        if e2e and e2e.get("trainer_tokens_per_s_busy") and tb and "tokens_per_s" in tb:
            out["e2e_trainer_vs_torch_bf16"] = e2e["trainer_tokens_per_s_busy"] / tb["tokens_per_s"]
        hb = pick(rg, dtype="bf16")
        if e2e and e2e.get("rollouter_tokens_per_s_busy") and hb and "tokens_per_s" in hb:
            out["e2e_rollouter_vs_hf_bf16"] = e2e["rollouter_tokens_per_s_busy"] / hb["tokens_per_s"]
    return out


def fmt(x, unit=""):
    if x is None:
        return "—"
    if abs(x) >= 1000:
        return f"{x / 1000:.1f}k{unit}"
    return f"{x:.3g}{unit}"


def ops(r):
    v = r.get("aten_ops_per_token")
    return "—" if v is None else f"{v:.1f}"


def max_lp_diff(gv):
    """Up to each response's first differing token (older results: over every position)."""
    return gv.get("max_logprob_diff_same_prefix", gv.get("max_logprob_diff", float("nan")))


def markdown(res):
    ours, ref, e2e = res["asyncrl"], res.get("reference") or {}, res.get("e2e") or {}
    lines = ["| | tokens/s | vs reference | MFU (bf16 peak) | peak memory | ATen ops / token |",
             "| --- | --- | --- | --- | --- | --- |"]
    gib = lambda b: f"{b / 2**30:.1f} GiB" if b else "—"  # noqa: E731
    for r in ref.get("train", []):
        lines.append(f"| PyTorch training step, {r['precision']} | {fmt(r.get('tokens_per_s'))} | 1 | "
                     f"— | {gib(r.get('cuda_peak_allocated_bytes'))} | — |")
    peak = ours["matmul_peak_tflops"]["bf16"]
    for r in ours["trainer"]:
        ref_row = pick(ref.get("train", []), precision="bf16_autocast" if r["precision"] == "bf16" else "float32")
        lines.append(f"| asyncrl trainer, {r['objective']}, {r['precision']} | {fmt(r['tokens_per_s'])} | "
                     f"{fmt(ratio(r, ref_row))} | {r['mfu_vs_bf16_peak']:.1%} | "
                     f"{gib(r.get('cuda_peak_allocated_bytes'))} | {ops(r)} |")
    for r in ref.get("generate", []):
        lines.append(f"| HF generate(), {r['dtype']} | {fmt(r.get('tokens_per_s'))} | 1 | — | "
                     f"{gib(r.get('cuda_peak_allocated_bytes'))} | — |")
    for r in ours["generation"]:
        lines.append(f"| asyncrl generation, {r['dtype']} | {fmt(r['tokens_per_s'])} | "
                     f"{fmt(ratio(r, pick(ref.get('generate', []), dtype=r['dtype'])))} | "
                     f"{r['mfu_vs_bf16_peak']:.1%} | {gib(r.get('cuda_peak_allocated_bytes'))} | {ops(r)} |")
    if e2e and "error" not in e2e:
        c = res["ratios"]
        lines.append(f"| asyncrl fully async run, trainer (busy), {e2e['precision']} | "
                     f"{fmt(e2e['trainer_tokens_per_s_busy'])} | {fmt(c.get('e2e_trainer_vs_torch_bf16'))} | — | — | — |")
        lines.append(f"| asyncrl fully async run, rollouter (busy), {e2e['precision']} | "
                     f"{fmt(e2e['rollouter_tokens_per_s_busy'])} | {fmt(c.get('e2e_rollouter_vs_hf_bf16'))} | — | — | — |")
        gb = e2e.get("gpu_busy") or {}
        if gb.get("mean_percent") is not None:
            lines.append(f"\nGPU busy in the fully async run's steady steps: {gb['mean_percent']:.0f}% "
                         f"({gb['samples']} nvidia-smi samples over {gb['window_s']:.1f} s; whole run "
                         f"{gb['whole_run_mean_percent']:.0f}%)")
    for r in ours["generation"]:
        gv = r.get("graph_vs_eager") or {}
        extra = (f"; CUDA graphs: {r.get('graphs_captured', 0)} captured, tokens equal to eager "
                 f"decoding in {gv['same_tokens']} of {gv['responses']} responses, max log-prob "
                 f"difference {max_lp_diff(gv):.1e}") if gv else ""
        host = r.get("weight_sync_host_s")
        host_txt = f" (through the host: {host * 1e3:.1f} ms)" if host is not None else ""
        lines.append(f"\nweight sync ({r['dtype']} rollouts, in process): "
                     f"{r.get('weight_sync_s', float('nan')) * 1e3:.1f} ms{host_txt}{extra}")
    lines.append(f"\nbf16 matmul peak {peak:.1f} TFLOP/s (asyncrl's measurement; the reference's "
                 f"{fmt((ref.get('matmul_peak_tflops') or {}).get('bf16'))})")
    return "\n".join(lines)


def git_commit():
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="")
    p.add_argument("--build", default=os.path.join(ROOT, "build"), help="asyncrl build directory")
    p.add_argument("--python", default="python3", help="a Python with torch and transformers; '' skips")
    p.add_argument("--shape", default="")
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--prompt", type=int, default=0)
    p.add_argument("--new-tokens", type=int, default=0)
    p.add_argument("--e2e-steps", type=int, default=6, help="0 skips the end-to-end run")
    p.add_argument("--e2e-precision", default="bf16", choices=["bf16", "float32"])
    p.add_argument("--micro-batch-tokens", type=int, default=8192,
                   help="trainer.micro_batch_tokens of the end-to-end run (0 = one group each)")
    p.add_argument("--timeout", type=int, default=900, help="seconds for each part")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()

    ref_ok, why = (None, "no --python") if not args.python else reference_available(args.python)
    if not args.device:
        args.device = "cuda" if ref_ok else "cpu"
    cuda = args.device.startswith("cuda")
    shape = args.shape or ("qwen2.5-0.5b" if cuda else "small")
    args.batch = args.batch or (128 if cuda else 8)
    args.prompt = args.prompt or (16 if cuda else 8)
    args.new_tokens = args.new_tokens or (48 if cuda else 8)
    s = SHAPES[shape]
    common = ["--batch", str(args.batch), "--prompt", str(args.prompt), "--new-tokens", str(args.new_tokens)]
    if args.threads:
        common += ["--threads", str(args.threads)]
    matmul = "8192" if cuda else "512"

    result = {"benchmark": "device_compare", "date": datetime.date.today().isoformat(),
              "commit": git_commit(), "device": args.device, "shape": shape}
    ours, err = run_json([os.path.join(args.build, "bench", "bench_device_throughput"), "--device", args.device,
                          "--shape", shape, "--matmul", matmul] + common, args.timeout)
    if ours is None:
        # The reference and the end-to-end run still measure something on a lent machine.
        print(f"device_compare: bench_device_throughput failed: {err}", file=sys.stderr)
        result["asyncrl_error"] = err
    result["asyncrl"] = ours
    if ref_ok is None:
        result["reference"] = None
        result["reference_skipped"] = why
    else:
        ref, err = run_json([args.python, os.path.join(ROOT, "bench", "torch_reference.py"), "--device",
                             args.device, "--hidden", str(s["hidden"]), "--layers", str(s["layers"]),
                             "--heads", str(s["heads"]), "--kv-heads", str(s["kv_heads"]),
                             "--intermediate", str(s["intermediate"]), "--vocab", "100",
                             "--matmul", matmul] + common, args.timeout)
        result["reference"] = ref
        if ref is None:
            result["reference_error"] = err
    with tempfile.TemporaryDirectory(prefix="device_compare.") as work:
        result["e2e"] = e2e_run(args, shape, work) if args.e2e_steps > 0 else None
    result["ratios"] = compare(ours, result["reference"], result["e2e"]) if ours else {}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    if args.markdown and ours:
        print(markdown(result))
    return 0 if ours else 1


if __name__ == "__main__":
    sys.exit(main())

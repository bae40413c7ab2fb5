#!/usr/bin/env python3
"""asyncrl next to plain and strong PyTorch/HF references, on one device, in one job; one JSON.

Runs, on the device given (default: cuda when the reference Python sees one, else cpu), these
parts in this order, each under its own time limit (--timeout, and never past --deadline):
  asyncrl     build/bench/bench_device_throughput: asyncrl's trainer step (float32 and bf16
              mixed precision; the policy-only step and the `rl` step) and its generation
              (float32 and bf16 rollouts), at the shape and batch below;
  reference   bench/torch_reference.py with --python (needs torch and transformers): HF's Qwen2
              of the same shape and batch: training steps (eager float32 and bf16 autocast with
              AdamW; bf16 with fused AdamW; fused AdamW + torch.compile), generate() (eager
              float32 and bf16; bf16 with a static cache + torch.compile) and the matmul peak
              over a sweep of sizes. A reference cut short by its limit keeps the rows it wrote;
  big         (CUDA) the Qwen2.5-1.5B shape, bf16, `rl`, 128 x (64 + 448) tokens, 3 timed steps,
              with activation checkpointing (MFU) and without (peak memory, generation);
  e2e         an end-to-end fully async `asyncrl train` of the same shape from a fresh model
              (the demo's config, bf16 rollouts and bf16 trainer unless --e2e-precision
              float32), whose trainer tokens/s (busy time) and rollouter tokens/s (from its idle
              ratio) come from metrics.jsonl;
  char_vocab  (CUDA) asyncrl's bf16 rows again at the char tokenizer's vocabulary (100): the
              shape of the earlier tables, as extra rows.
With --out the JSON is rewritten after every part (to a temporary file, then renamed), so a job
stopped by its time limit leaves every part it finished; `parts_done` lists them. Then the
ratios (asyncrl / reference; bf16 against bf16), MFU against the best measured bf16 matmul peak,
peak memory, and the issue-41 targets as pass/miss (`targets`). --markdown also prints the
tables docs/benchmarks.md keeps.

  python3 bench/device_compare.py --device cuda --python python3 --out bench/results/device.json
  python3 bench/device_compare.py --device cpu                        # the small CPU shape (CI)

Shapes: qwen2.5-0.5b (hidden 896, 24 layers, 14/2 heads, MLP 4864, tied, Qwen2.5's vocabulary
of 151,936) at batch 128 x (16 + 48) tokens on CUDA; small (hidden 64, 2 layers, the char
vocabulary of 100) at batch 8 x (8 + 8) on the CPU. The end-to-end run uses the arithmetic task
with the built-in char vocabulary, or with --e2e-tokenizer (default on CUDA: Qwen2.5's
tokenizer in tests/fixtures/hf/qwen2_5 when it is there) that tokenizer's vocabulary.
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
QWEN25_VOCAB = 151936
CHAR_VOCAB = 100
SHAPES = {
    "qwen2.5-0.5b": dict(hidden=896, layers=24, heads=14, kv_heads=2, intermediate=4864, vocab=QWEN25_VOCAB),
    "small": dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=192, vocab=CHAR_VOCAB),
}
# FLOPs per token per parameter of the end-to-end run's trainer: configs/demo.yaml's loss is
# decoupled with loglinear prox (no old-policy forward) and trainer.compute_ref is on (the
# reference forward for the kl metric): policy forward 2 + backward 4 + reference forward 2.
E2E_FLOPS_PER_PARAMETER = 8.0
# Issue 41's targets.
TARGET_TRAINER_VS_COMPILED = 1.0
TARGET_GENERATION_VS_STATIC_COMPILED = 2.0
TARGET_DECODE_STEP_MS = 1.5
TARGET_BIG_MFU = 0.35


def write_atomically(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def parse_last_json(text):
    """The JSON object that is the output's last top-level {...} (after any log lines)."""
    start = text.find("\n{")
    return json.loads(text[start + 1:] if start >= 0 else text)


def run_json(cmd, timeout):
    """Runs cmd, returns (json or None, error text)."""
    if timeout <= 0:
        return None, "no time left before --deadline"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: {' '.join(cmd)}"
    except OSError as e:
        return None, f"{cmd[0]}: {e}"
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {(p.stderr or p.stdout)[-1500:]}"
    try:
        return parse_last_json(p.stdout), ""
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


def e2e_run(args, shape, workdir, extra=(), timeout=None):
    """A fully async run of the shape; trainer and rollouter tokens/s from its metrics. `extra`:
    more config overrides (bench/e2e_probe.py's variants)."""
    timeout = args.timeout if timeout is None else timeout
    if timeout <= 0:
        return {"error": "no time left before --deadline"}
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
    tokenizer = getattr(args, "e2e_tokenizer", "")
    if tokenizer:  # its arithmetic prompts run to about 35 tokens, over demo.yaml's 16
        cmd += [f"model.tokenizer={tokenizer}", "data.max_prompt_length=64"]
    watch = GpuBusyWatch(os.path.join(run_dir, "metrics.jsonl")) if args.device.startswith("cuda") else None
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s", "command": " ".join(cmd)}
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
        "tokenizer": tokenizer or "char (vocabulary 100)",
        "flops_per_token_per_parameter": E2E_FLOPS_PER_PARAMETER,
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


# A row's field when older results lack it: the rows of earlier tables are the eager ones.
ROW_DEFAULTS = {"variant": "eager"}


def pick(rows, **match):
    for r in rows or []:
        if all(r.get(k, ROW_DEFAULTS.get(k)) == v for k, v in match.items()):
            return r
    return None


def main_rows(ref, kind):
    """The reference's rows at its main vocabulary (the extra char-vocabulary rows left out)."""
    v = ref.get("vocab")
    return [r for r in ref.get(kind, []) if v is None or r.get("vocab", v) == v]


def ratio(a, b):
    if not a or not b or "tokens_per_s" not in a or "tokens_per_s" not in b:
        return None
    return a["tokens_per_s"] / b["tokens_per_s"]


def best_bf16_peak(res):
    """The best bf16 matmul TFLOP/s measured in this run by either side (the sweeps)."""
    peaks = [((res.get(k) or {}).get("matmul_peak_tflops") or {}).get("bf16") for k in ("asyncrl", "reference")]
    peaks = [p for p in peaks if p]
    return max(peaks) if peaks else None


def compare(ours, ref, e2e):
    t, g = ours["trainer"], ours["generation"]
    out = {}
    if ref:
        rt, rg = main_rows(ref, "train"), main_rows(ref, "generate")
        tb_eager = pick(rt, precision="bf16_autocast", variant="eager")
        out["trainer_policy_only_float32_vs_torch_float32"] = ratio(
            pick(t, precision="float32", objective="policy_only"), pick(rt, precision="float32", variant="eager"))
        out["trainer_policy_only_bf16_vs_torch_bf16"] = ratio(
            pick(t, precision="bf16", objective="policy_only"), tb_eager)
        out["trainer_rl_bf16_vs_torch_bf16"] = ratio(pick(t, precision="bf16", objective="rl"), tb_eager)
        # The strong references: the same work (policy_only = a plain step) against fused AdamW,
        # eager and under torch.compile.
        out["trainer_policy_only_bf16_vs_torch_fused"] = ratio(
            pick(t, precision="bf16", objective="policy_only"), pick(rt, precision="bf16_autocast", variant="fused"))
        out["trainer_policy_only_bf16_vs_torch_fused_compiled"] = ratio(
            pick(t, precision="bf16", objective="policy_only"),
            pick(rt, precision="bf16_autocast", variant="fused_compiled"))
        out["generation_float32_vs_hf_float32"] = ratio(pick(g, dtype="float32"),
                                                        pick(rg, dtype="float32", variant="eager"))
        hb = pick(rg, dtype="bf16", variant="eager")
        out["generation_bf16_vs_hf_bf16"] = ratio(pick(g, dtype="bf16"), hb)
        out["generation_bf16_vs_hf_static_compiled"] = ratio(
            pick(g, dtype="bf16"), pick(rg, dtype="bf16", variant="static_compiled"))
        if e2e and e2e.get("trainer_tokens_per_s_busy") and tb_eager and "tokens_per_s" in tb_eager:
            out["e2e_trainer_vs_torch_bf16"] = e2e["trainer_tokens_per_s_busy"] / tb_eager["tokens_per_s"]
        if e2e and e2e.get("rollouter_tokens_per_s_busy") and hb and "tokens_per_s" in hb:
            out["e2e_rollouter_vs_hf_bf16"] = e2e["rollouter_tokens_per_s_busy"] / hb["tokens_per_s"]
    # The end-to-end trainer against its own benchmark, per FLOP: the e2e run counts 8 N per
    # token (no old-policy forward), the `rl` row 10 N.
    rl = pick(t, precision=(e2e or {}).get("precision"), objective="rl")
    if e2e and e2e.get("trainer_tokens_per_s_busy") and rl and rl.get("tokens_per_s"):
        out["e2e_trainer_vs_own_rl_per_flop"] = (
            e2e["trainer_tokens_per_s_busy"] * e2e.get("flops_per_token_per_parameter", E2E_FLOPS_PER_PARAMETER)
            / (rl["tokens_per_s"] * rl.get("flops_per_token_per_parameter", 10.0)))
    return out


def decode_step_ms(row):
    """A generation row's time per decode step: a run's time over its decode steps (the prefill
    and the host work of each chunk inside, so an upper bound on the step itself)."""
    if not row or not row.get("s") or not row.get("decode_steps_all_runs") or not row.get("runs"):
        return None
    return row["s"] * 1e3 / (row["decode_steps_all_runs"] / row["runs"])


def targets(res):
    """Issue 41's targets: value, goal, pass (True/False), or None where this run cannot say
    (a part missing, or a shape and batch other than the target's)."""
    ours, ratios = res.get("asyncrl") or {}, res.get("ratios") or {}
    main_shape = (ours.get("shape") or {}).get("name") == "qwen2.5-0.5b" and ours.get("batch") == 128 \
        and str(res.get("device", "")).startswith("cuda")
    gen = pick(ours.get("generation"), dtype="bf16")
    rows = []

    def add(name, goal, value, ok, applies, note):
        rows.append({"target": name, "goal": goal, "value": value, "note": note,
                     "pass": (ok(value) if value is not None else None) if applies else None})

    add("trainer_vs_compiled_step", f">= {TARGET_TRAINER_VS_COMPILED}x",
        ratios.get("trainer_policy_only_bf16_vs_torch_fused_compiled"),
        lambda v: v >= TARGET_TRAINER_VS_COMPILED, main_shape,
        "asyncrl trainer, policy_only, bf16 / PyTorch step with fused AdamW and torch.compile")
    add("generation_vs_static_compiled", f">= {TARGET_GENERATION_VS_STATIC_COMPILED}x at batch 128",
        ratios.get("generation_bf16_vs_hf_static_compiled"),
        lambda v: v >= TARGET_GENERATION_VS_STATIC_COMPILED, main_shape,
        "asyncrl generation, bf16 / HF generate() with a static cache and torch.compile")
    add("decode_step_ms", f"<= {TARGET_DECODE_STEP_MS} ms at batch 128 (0.5B)", decode_step_ms(gen),
        lambda v: v <= TARGET_DECODE_STEP_MS, main_shape,
        "asyncrl bf16 generation: a run's time / its decode steps (prefill included: an upper bound)")
    big = ((res.get("big") or {}).get("checkpointing") or {})
    big_rl = pick(big.get("trainer"), objective="rl")
    peak = best_bf16_peak(res)
    mfu = big_rl["model_tflops"] / peak if big_rl and peak else None
    add("big_mfu_checkpointing", f">= {TARGET_BIG_MFU:.0%} (1.5B, activation checkpointing)", mfu,
        lambda v: v >= TARGET_BIG_MFU, bool(big_rl),
        "qwen2.5-1.5b rl step, 10 N FLOPs per token (recomputation not counted) / best bf16 peak")
    return rows


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


def gib(b):
    return f"{b / 2**30:.1f} GiB" if b else "—"


def ref_label(r, kind):
    if r.get("label"):
        return r["label"]
    return (f"PyTorch training step, {r['precision']}" if kind == "train"
            else f"HF generate(), {r['dtype']}")


def markdown(res):
    ours, ref, e2e = res["asyncrl"], res.get("reference") or {}, res.get("e2e") or {}
    c = res.get("ratios") or {}
    peak = best_bf16_peak(res) or ours["matmul_peak_tflops"]["bf16"]
    mfu = lambda r: f"{r['model_tflops'] / peak:.1%}" if r.get("model_tflops") and peak else "—"  # noqa: E731
    rv = ref.get("vocab")
    lines = [f"Vocabulary {ours['shape']['vocab_size']:,} (asyncrl) and {f'{rv:,}' if rv else '—'} (reference); "
             f"MFU against the best bf16 matmul peak measured in this run, {peak:.1f} TFLOP/s.", "",
             "| | tokens/s | vs plain reference | vs strong reference | MFU (bf16 peak) | peak memory | ATen ops / token |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in ref.get("train", []):
        extra = f" [{r['attn_implementation']}: {r.get('sdpa_backend', '—')}]" if r.get("attn_implementation") else ""
        val = f"error: {r['error'][:60]}" if "error" in r else ("skipped" if "skipped" in r else fmt(r.get("tokens_per_s")))
        lines.append(f"| {ref_label(r, 'train')}{extra} | {val} | — | — | {mfu(r)} | "
                     f"{gib(r.get('cuda_peak_allocated_bytes'))} | — |")
    rt = main_rows(ref, "train") if ref else []
    for r in ours["trainer"]:
        plain = pick(rt, precision="bf16_autocast" if r["precision"] == "bf16" else "float32", variant="eager")
        strong = pick(rt, precision="bf16_autocast", variant="fused_compiled") if r["precision"] == "bf16" else None
        lines.append(f"| asyncrl trainer, {r['objective']}, {r['precision']} | {fmt(r['tokens_per_s'])} | "
                     f"{fmt(ratio(r, plain))} | {fmt(ratio(r, strong))} | {mfu(r)} | "
                     f"{gib(r.get('cuda_peak_allocated_bytes'))} | {ops(r)} |")
    for r in ref.get("generate", []):
        val = f"error: {r['error'][:60]}" if "error" in r else ("skipped" if "skipped" in r else fmt(r.get("tokens_per_s")))
        lines.append(f"| {ref_label(r, 'generate')} | {val} | — | — | — | "
                     f"{gib(r.get('cuda_peak_allocated_bytes'))} | — |")
    rg = main_rows(ref, "generate") if ref else []
    for r in ours["generation"]:
        strong = pick(rg, dtype="bf16", variant="static_compiled") if r["dtype"] == "bf16" else None
        lines.append(f"| asyncrl generation, {r['dtype']} | {fmt(r['tokens_per_s'])} | "
                     f"{fmt(ratio(r, pick(rg, dtype=r['dtype'], variant='eager')))} | {fmt(ratio(r, strong))} | "
                     f"{mfu(r)} | {gib(r.get('cuda_peak_allocated_bytes'))} | {ops(r)} |")
    # The char-vocabulary rows, against the reference's rows at that vocabulary (bf16 only).
    char_t = pick(ref.get("train"), precision="bf16_autocast", variant="eager", vocab=CHAR_VOCAB)
    char_g = pick(ref.get("generate"), dtype="bf16", variant="eager", vocab=CHAR_VOCAB)
    for r in (res.get("asyncrl_char_vocab") or {}).get("trainer", []):
        lines.append(f"| asyncrl trainer, {r['objective']}, {r['precision']} (vocab {CHAR_VOCAB}) | "
                     f"{fmt(r['tokens_per_s'])} | {fmt(ratio(r, char_t))} | — | {mfu(r)} | "
                     f"{gib(r.get('cuda_peak_allocated_bytes'))} | {ops(r)} |")
    for r in (res.get("asyncrl_char_vocab") or {}).get("generation", []):
        lines.append(f"| asyncrl generation, {r['dtype']} (vocab {CHAR_VOCAB}) | {fmt(r['tokens_per_s'])} | "
                     f"{fmt(ratio(r, char_g))} | — | {mfu(r)} | {gib(r.get('cuda_peak_allocated_bytes'))} | {ops(r)} |")
    if e2e and "error" not in e2e:
        lines.append(f"| asyncrl fully async run, trainer (busy), {e2e['precision']} | "
                     f"{fmt(e2e['trainer_tokens_per_s_busy'])} | {fmt(c.get('e2e_trainer_vs_torch_bf16'))} | — | — | — | — |")
        lines.append(f"| asyncrl fully async run, rollouter (busy), {e2e['precision']} | "
                     f"{fmt(e2e['rollouter_tokens_per_s_busy'])} | {fmt(c.get('e2e_rollouter_vs_hf_bf16'))} | — | — | — | — |")
        if c.get("e2e_trainer_vs_own_rl_per_flop") is not None:
            lines.append(f"\nThe fully async run's trainer per FLOP against its own benchmark's `rl` row "
                         f"({e2e.get('flops_per_token_per_parameter', E2E_FLOPS_PER_PARAMETER):g}N against 10N "
                         f"per token): {c['e2e_trainer_vs_own_rl_per_flop']:.2f}x (tokenizer: {e2e.get('tokenizer')})")
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
    big = res.get("big") or {}
    if big:
        lines += ["", "| Qwen2.5-1.5B shape, bf16, rl | step (s) | tokens/s | MFU (bf16 peak) | peak memory | generation tokens/s |",
                  "| --- | --- | --- | --- | --- | --- |"]
        for key in ("checkpointing", "no_checkpointing"):
            b = big.get(key) or {}
            r = pick(b.get("trainer"), objective="rl")
            gen = pick(b.get("generation"), dtype="bf16")
            what = "activation checkpointing" if key == "checkpointing" else "no checkpointing"
            if not r:
                lines.append(f"| {what} | {big.get(key + '_error', 'not run')[:80]} | — | — | — | — |")
                continue
            lines.append(f"| {what} | {r['step_s']:.2f} ({len(r.get('step_s_runs', []))} steps) | {fmt(r['tokens_per_s'])} | "
                         f"{mfu(r)} | {gib(r.get('cuda_peak_allocated_bytes'))} | {fmt((gen or {}).get('tokens_per_s'))} |")
    lines += ["", "| target (issue 41) | goal | measured | |", "| --- | --- | --- | --- |"]
    for t in res.get("targets", []):
        v = t["value"]
        shown = "—" if v is None else (f"{v:.1%}" if t["target"] == "big_mfu_checkpointing" else
                                        f"{v:.2f} ms" if t["target"] == "decode_step_ms" else f"{v:.2f}x")
        verdict = {True: "pass", False: "**miss**", None: "not measured here"}[t["pass"]]
        lines.append(f"| {t['target']} | {t['goal']} | {shown} | {verdict} |")
    sweep = (ref.get("matmul_peak_tflops") or {}).get("sweep") or ours["matmul_peak_tflops"].get("sweep") or []
    lines.append(f"\nbf16 matmul peak: asyncrl {ours['matmul_peak_tflops']['bf16']:.1f} TFLOP/s "
                 f"(n = {ours['matmul_peak_tflops'].get('n')}), the reference "
                 f"{fmt((ref.get('matmul_peak_tflops') or {}).get('bf16'))}; sweep: "
                 + ", ".join(f"{s['n']}: {fmt(s.get('bf16'))}" for s in sweep))
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
    p.add_argument("--vocab", type=int, default=0, help="0: the shape's own (151,936 for qwen2.5, 100 small)")
    p.add_argument("--batch", type=int, default=0)
    p.add_argument("--prompt", type=int, default=0)
    p.add_argument("--new-tokens", type=int, default=0)
    p.add_argument("--parts", default="", help="comma list of asyncrl,reference,big,e2e,char_vocab "
                   "(default: all on CUDA; asyncrl,reference,e2e on the CPU)")
    p.add_argument("--e2e-steps", type=int, default=6, help="0 skips the end-to-end run")
    p.add_argument("--e2e-precision", default="bf16", choices=["bf16", "float32"])
    p.add_argument("--e2e-tokenizer", default=None,
                   help="model.tokenizer of the end-to-end run ('' = the char vocabulary; default on "
                        "CUDA: tests/fixtures/hf/qwen2_5 when present)")
    p.add_argument("--micro-batch-tokens", type=int, default=8192,
                   help="trainer.micro_batch_tokens of the end-to-end run (0 = one group each)")
    p.add_argument("--compile", type=int, default=1, help="0 leaves the reference's torch.compile rows out")
    p.add_argument("--timeout", type=int, default=900, help="seconds for each part")
    p.add_argument("--deadline", type=int, default=0,
                   help="seconds for the whole run (0: none); each part gets at most what is left")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="")
    p.add_argument("--markdown", action="store_true")
    args = p.parse_args()
    t_start = time.monotonic()

    def budget(cap=None):
        left = args.timeout if cap is None else min(args.timeout, cap)
        if args.deadline:
            left = min(left, int(args.deadline - (time.monotonic() - t_start)) - 5)
        return left

    ref_ok, why = (None, "no --python") if not args.python else reference_available(args.python)
    if not args.device:
        args.device = "cuda" if ref_ok else "cpu"
    cuda = args.device.startswith("cuda")
    shape = args.shape or ("qwen2.5-0.5b" if cuda else "small")
    s = SHAPES[shape]
    vocab = args.vocab or s["vocab"]
    args.batch = args.batch or (128 if cuda else 8)
    args.prompt = args.prompt or (16 if cuda else 8)
    args.new_tokens = args.new_tokens or (48 if cuda else 8)
    if args.e2e_tokenizer is None:
        qwen_tok = os.path.join(ROOT, "tests", "fixtures", "hf", "qwen2_5")
        args.e2e_tokenizer = qwen_tok if cuda and os.path.isfile(os.path.join(qwen_tok, "tokenizer.json")) else ""
    parts = [x for x in (args.parts or ("asyncrl,reference,big,e2e,char_vocab" if cuda
                                        else "asyncrl,reference,e2e")).split(",") if x]
    if args.e2e_steps <= 0 and "e2e" in parts:
        parts.remove("e2e")
    common = ["--batch", str(args.batch), "--prompt", str(args.prompt), "--new-tokens", str(args.new_tokens)]
    if args.threads:
        common += ["--threads", str(args.threads)]
    ours_matmul = "4096,8192,16384" if cuda else "512"
    bench = os.path.join(args.build, "bench", "bench_device_throughput")

    result = {"benchmark": "device_compare", "date": datetime.date.today().isoformat(),
              "commit": git_commit(), "device": args.device, "shape": shape, "vocab": vocab,
              "parts": parts, "parts_done": [], "part_seconds": {},
              "asyncrl": None, "reference": None, "e2e": None, "ratios": {}, "targets": []}

    def finish_part(name, t0):
        result["part_seconds"][name] = round(time.monotonic() - t0, 1)
        result["parts_done"].append(name)
        ours = result["asyncrl"]
        result["ratios"] = compare(ours, result["reference"], result["e2e"]) if ours else {}
        result["targets"] = targets(result)
        if args.out:
            write_atomically(args.out, json.dumps(result, indent=2) + "\n")

    with tempfile.TemporaryDirectory(prefix="device_compare.") as work:
        for part in parts:
            t0 = time.monotonic()
            if part == "asyncrl":
                ours, err = run_json([bench, "--device", args.device, "--shape", shape, "--vocab", str(vocab),
                                      "--matmul", ours_matmul] + common, budget())
                if ours is None:
                    # The reference and the end-to-end run still measure something on a lent machine.
                    print(f"device_compare: bench_device_throughput failed: {err}", file=sys.stderr)
                    result["asyncrl_error"] = err
                result["asyncrl"] = ours
            elif part == "reference":
                if ref_ok is None:
                    result["reference_skipped"] = why
                else:
                    # The reference rewrites this file after each row: a cut-short run keeps them.
                    partial = (args.out + ".reference.json") if args.out else os.path.join(work, "reference.json")
                    ref, err = run_json([args.python, os.path.join(ROOT, "bench", "torch_reference.py"),
                                         "--device", args.device, "--hidden", str(s["hidden"]),
                                         "--layers", str(s["layers"]), "--heads", str(s["heads"]),
                                         "--kv-heads", str(s["kv_heads"]), "--intermediate", str(s["intermediate"]),
                                         "--vocab", str(vocab), "--extra-vocab", str(CHAR_VOCAB if cuda else 0),
                                         "--matmul", "4096,8192,12288,16384" if cuda else "512",
                                         "--compile", str(args.compile), "--out", partial] + common, budget())
                    if ref is None:
                        result["reference_error"] = err
                        try:
                            ref = json.load(open(partial))
                            ref["partial"] = True
                        except (OSError, json.JSONDecodeError):
                            ref = None
                    result["reference"] = ref
            elif part == "big":
                # Checkpointing first (the MFU target), then without it (peak memory, generation).
                big = {}
                result["big"] = big
                for key, ckpt, gen in (("checkpointing", "1", ["--skip-generation"]), ("no_checkpointing", "0", [])):
                    j, err = run_json([bench, "--device", args.device, "--shape", "qwen2.5-1.5b", "--precisions", "bf16",
                                       "--batch", "128", "--prompt", "64", "--new-tokens", "448",
                                       "--micro-batch-tokens", "8192", "--objectives", "rl", "--steps", "3",
                                       "--reps", "1", "--matmul", "8192", "--activation-checkpointing", ckpt] + gen,
                                      budget())
                    big[key] = j
                    if j is None:
                        big[key + "_error"] = err
                    if args.out:  # each of the two runs is worth keeping on its own
                        write_atomically(args.out, json.dumps(result, indent=2) + "\n")
            elif part == "e2e":
                result["e2e"] = e2e_run(args, shape, work, timeout=budget())
            elif part == "char_vocab":
                j, err = run_json([bench, "--device", args.device, "--shape", shape, "--vocab", str(CHAR_VOCAB),
                                   "--precisions", "bf16", "--matmul", "8192" if cuda else "512"] + common, budget())
                result["asyncrl_char_vocab"] = j
                if j is None:
                    result["asyncrl_char_vocab_error"] = err
            else:
                print(f"device_compare: unknown part {part!r} (asyncrl, reference, big, e2e, char_vocab)",
                      file=sys.stderr)
                return 2
            finish_part(part, t0)
    if "reference" not in parts:
        result.setdefault("reference_skipped", "not in --parts")
    ours = result["asyncrl"]
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        write_atomically(args.out, text + "\n")
    if args.markdown and ours:
        print(markdown(result))
    return 0 if ours else 1


if __name__ == "__main__":
    sys.exit(main())

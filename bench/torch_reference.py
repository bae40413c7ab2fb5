#!/usr/bin/env python3
"""The plain and the strong references asyncrl is measured against, on the same device and model
shape (HF transformers' Qwen2, random weights): training steps, HF `generate()`, and the
device's matmul peak. Prints one JSON object and, with --out, rewrites that file atomically
after every row, so a run cut short by its time limit still leaves what it measured. Used by
bench/device_compare.py; needs `torch` and `transformers` in the Python that runs it (never a
dependency of asyncrl itself).

  python3 bench/torch_reference.py --device cuda --hidden 896 --layers 24 --heads 14 \\
      --kv-heads 2 --intermediate 4864 --vocab 151936 --batch 128 --prompt 16 --new-tokens 48

Rows, each with a `label`, a `variant` and the `vocab` it ran at:
  train     eager           float32 and bf16 autocast, torch.optim.AdamW's default (foreach)
                            implementation: the plain step of the earlier tables;
            fused           bf16 autocast, AdamW(fused=True);
            fused_compiled  bf16 autocast, AdamW(fused=True), the model under torch.compile
                            (forward and backward through inductor).
  generate  eager           float32 and bf16, the default dynamic cache: the plain generate();
            static_compiled bf16, cache_implementation="static" with a CompileConfig
                            (mode="reduce-overhead": inductor and CUDA graphs), the fast path
                            transformers documents for generate().
  Every train and generate row records the attention implementation (config
  _attn_implementation) and, for SDPA, the backend torch picks for the row's attention shape
  (`sdpa_backend`, from torch._fused_sdp_choice: a probe of the same shape, dtype and causal
  flag, not a trace of the run).
  --extra-vocab V (default 100, the char tokenizer's) adds the eager bf16 train and generate
  rows at that vocabulary too, to line up with earlier tables; 0 or V == --vocab leaves them out.
  matmul_peak_tflops: the best of an n x n matmul over --matmul's sizes (bf16 and float32), with
  every size under `sweep`.
  Order: the sweep, the bf16 rows with the strong ones, then float32 and the extra vocabulary,
  so that a run stopped by its time limit has measured what the targets compare against.
Each row runs under its own try: an out-of-memory or a torch.compile failure (no compiler, an
unsupported device) records the row with an `error` and the run goes on. --compile 0 leaves the
compiled rows out (recorded as skipped).

Tokens of a training step are batch * (prompt + new): every position is trained on, as in a
plain LM step; its FLOPs are 6 N per token for N parameters. Generation tokens are the new ones.
"""
import argparse
import json
import os
import time
import traceback

import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def reset_peak(dev):
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)


def peak_bytes(dev):
    return torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None


def write_atomically(path, text):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def matmul_tflops(dev, dtype, n):
    a = torch.randn(n, n, device=dev, dtype=dtype)
    b = torch.randn(n, n, device=dev, dtype=dtype)
    for _ in range(2):
        a @ b
    sync(dev)
    reps = 10 if dev.type == "cuda" else 2
    t0 = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(dev)
    return reps * 2 * n**3 / (time.perf_counter() - t0) / 1e12


def matmul_sweep(dev, sizes):
    """The peak over the sizes: one size alone (1024) may not fill the device."""
    out = {"bf16": 0.0, "float32": 0.0, "n": None, "sweep": []}
    for n in sizes:
        row = {"label": f"matmul {n}x{n}", "n": n}
        try:
            row["bf16"] = matmul_tflops(dev, torch.bfloat16, n)
            row["float32"] = matmul_tflops(dev, torch.float32, n)
        except Exception as e:  # noqa: BLE001 - an OOM at the largest size keeps the others
            row["error"] = str(e)[:300]
        out["sweep"].append(row)
        if row.get("bf16", 0) > out["bf16"]:
            out["bf16"], out["n"] = row["bf16"], n
        out["float32"] = max(out["float32"], row.get("float32", 0.0))
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return out


def attention_info(model, args, dev, dtype, q_len, kv_len):
    """The attention implementation and, for SDPA, the backend torch picks for this shape."""
    cfg = model.config
    impl = getattr(cfg, "_attn_implementation", None)
    info = {"attn_implementation": impl}
    if impl != "sdpa":
        return info
    try:
        from torch.nn.attention import SDPBackend
        head_dim = args.hidden // args.heads
        q = torch.empty(args.batch, args.heads, q_len, head_dim, device=dev, dtype=dtype)
        kv = torch.empty(args.batch, args.heads, kv_len, head_dim, device=dev, dtype=dtype)
        choice = torch._fused_sdp_choice(q, kv, kv, None, 0.0, q_len > 1 and q_len == kv_len)
        info["sdpa_backend"] = SDPBackend(choice).name
    except Exception as e:  # noqa: BLE001 - a private API: its absence is a note, not a failure
        info["sdpa_backend"] = f"unknown ({type(e).__name__}: {str(e)[:100]})"
    return info


def make_model(cfg, dev, dtype=None):
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(dev)
    return model.to(dtype) if dtype is not None else model


def train_step(cfg, args, dev, bf16, fused=False, compiled=False):
    model = make_model(cfg, dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True if fused else None)
    run = torch.compile(model) if compiled else model
    x = torch.randint(3, cfg.vocab_size, (args.batch, args.prompt + args.new_tokens), device=dev)
    reset_peak(dev)
    warmup = 2 if compiled else 1  # compiled: the first step compiles, the second settles
    times, first_s = [], None
    for step in range(args.steps + warmup):
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = run(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(dev)
        if step == 0:
            first_s = time.perf_counter() - t0
        if step >= warmup:
            times.append(time.perf_counter() - t0)
    s = sorted(times)[len(times) // 2]
    n_params = sum(p.numel() for p in model.parameters())
    tokens = args.batch * (args.prompt + args.new_tokens)
    T = args.prompt + args.new_tokens
    row = {"step_s": s, "step_s_runs": times, "first_step_s": first_s,
           "tokens_per_s": tokens / s, "model_tflops": 6 * n_params * tokens / s / 1e12,
           "cuda_peak_allocated_bytes": peak_bytes(dev),
           "optimizer": "AdamW(fused=True)" if fused else "AdamW (default: foreach)",
           "torch_compile": compiled}
    row.update(attention_info(model, args, dev, torch.bfloat16 if bf16 else torch.float32, T, T))
    return row


def generate(cfg, args, dev, dtype, static_compiled=False):
    from transformers import CompileConfig
    model = make_model(cfg, dev, dtype)
    model.eval()
    ids = torch.randint(3, cfg.vocab_size, (args.batch, args.prompt), device=dev)
    kw = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=True,
              temperature=1.0, top_k=0, pad_token_id=0)
    if static_compiled:
        cc = CompileConfig(mode="reduce-overhead", fullgraph=False)
        # generate() compiles on accelerators only; this flag (transformers' own, for tests)
        # makes the CPU path compile too, so CI exercises the row.
        cc._compile_all_devices = dev.type != "cuda"
        kw.update(cache_implementation="static", compile_config=cc)
    reset_peak(dev)
    warmup = 2 if static_compiled else 1  # compile, then CUDA-graph recording
    first_s = None
    with torch.no_grad():
        for i in range(warmup):
            t0 = time.perf_counter()
            model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
            sync(dev)
            if i == 0:
                first_s = time.perf_counter() - t0
        times = []
        for _ in range(args.reps):
            sync(dev)
            t0 = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
            sync(dev)
            times.append(time.perf_counter() - t0)
            assert out.shape[1] == args.prompt + args.new_tokens, out.shape
    s = sorted(times)[len(times) // 2]
    row = {"s": s, "s_runs": times, "first_run_s": first_s,
           "tokens_per_s": args.batch * args.new_tokens / s,
           # Whole generate() over its new tokens: the prefill and the sampling are inside.
           "decode_step_ms": s / args.new_tokens * 1e3,
           "cuda_peak_allocated_bytes": peak_bytes(dev),
           "cache": "static" if static_compiled else "dynamic",
           "torch_compile": "reduce-overhead" if static_compiled else False}
    row.update(attention_info(model, args, dev, dtype, 1, args.prompt + args.new_tokens))
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hidden", type=int, default=896)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=4864)
    p.add_argument("--vocab", type=int, default=151936, help="Qwen2.5's real vocabulary")
    p.add_argument("--extra-vocab", type=int, default=100,
                   help="eager bf16 rows at this vocabulary too (the char tokenizer's); 0: none")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--matmul", default="",
                   help="sizes of the peak sweep (default 4096,8192,12288,16384 on CUDA, 512 on the CPU)")
    p.add_argument("--compile", type=int, default=1, help="0 leaves the torch.compile rows out")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    sizes = [int(n) for n in (args.matmul or ("4096,8192,12288,16384" if dev.type == "cuda"
                                              else "512")).split(",") if n]

    def config(vocab):
        return Qwen2Config(vocab_size=vocab, hidden_size=args.hidden,
                           intermediate_size=args.intermediate, num_hidden_layers=args.layers,
                           num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                           max_position_embeddings=max(128, args.prompt + args.new_tokens),
                           tie_word_embeddings=True, rope_theta=10000.0)

    cfg = config(args.vocab)
    with torch.device("meta"):  # the count only: no memory, no init
        n_params = sum(p.numel() for p in Qwen2ForCausalLM(cfg).parameters())
    out = {"benchmark": "torch_reference", "device": str(dev),
           "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
           "torch": torch.__version__, "transformers": transformers.__version__,
           "vocab": args.vocab,
           "parameters": n_params,
           "batch": args.batch, "prompt_tokens": args.prompt, "new_tokens": args.new_tokens,
           "matmul_peak_tflops": None, "train": [], "generate": [], "done": False}

    def save():
        if args.out:
            write_atomically(args.out, json.dumps(out, indent=2) + "\n")

    def row(kind, base, fn):
        """Runs one row; its failure is recorded in the row, never raised."""
        t0 = time.perf_counter()
        r = dict(base)
        try:
            r.update(fn())
        except Exception as e:  # noqa: BLE001 - an OOM or a compile failure must not lose the others
            r["error"] = f"{type(e).__name__}: {str(e)[:400]}"
            r["traceback_tail"] = traceback.format_exc()[-800:]
        r["wall_s"] = time.perf_counter() - t0
        out[kind].append(r)
        if dev.type == "cuda":
            torch.cuda.empty_cache()
        save()

    def skipped(kind, base):
        out[kind].append(dict(base, skipped="--compile 0"))
        save()

    out["matmul_peak_tflops"] = matmul_sweep(dev, sizes)
    save()
    # bf16 and the strong rows first: a run cut short by its time limit keeps what the targets
    # compare against; the float32 and char-vocabulary rows (the earlier tables') come last.
    V = args.vocab
    row("train", {"label": "PyTorch training step, bf16_autocast, AdamW", "precision": "bf16_autocast",
                  "variant": "eager", "vocab": V},
        lambda: train_step(cfg, args, dev, True))
    row("train", {"label": "PyTorch training step, bf16_autocast, fused AdamW",
                  "precision": "bf16_autocast", "variant": "fused", "vocab": V},
        lambda: train_step(cfg, args, dev, True, fused=True))
    base = {"label": "PyTorch training step, bf16_autocast, fused AdamW, torch.compile",
            "precision": "bf16_autocast", "variant": "fused_compiled", "vocab": V}
    if args.compile:
        row("train", base, lambda: train_step(cfg, args, dev, True, fused=True, compiled=True))
    else:
        skipped("train", base)
    row("generate", {"label": "HF generate(), bf16", "dtype": "bf16", "variant": "eager", "vocab": V},
        lambda: generate(cfg, args, dev, torch.bfloat16))
    base = {"label": "HF generate(), bf16, static cache + torch.compile (reduce-overhead)",
            "dtype": "bf16", "variant": "static_compiled", "vocab": V}
    if args.compile:
        row("generate", base, lambda: generate(cfg, args, dev, torch.bfloat16, static_compiled=True))
    else:
        skipped("generate", base)
    row("train", {"label": "PyTorch training step, float32, AdamW", "precision": "float32",
                  "variant": "eager", "vocab": V},
        lambda: train_step(cfg, args, dev, False))
    row("generate", {"label": "HF generate(), float32", "dtype": "float32", "variant": "eager", "vocab": V},
        lambda: generate(cfg, args, dev, torch.float32))
    if args.extra_vocab and args.extra_vocab != V:
        xcfg, xv = config(args.extra_vocab), args.extra_vocab
        row("train", {"label": f"PyTorch training step, bf16_autocast, AdamW (vocab {xv})",
                      "precision": "bf16_autocast", "variant": "eager", "vocab": xv},
            lambda: train_step(xcfg, args, dev, True))
        row("generate", {"label": f"HF generate(), bf16 (vocab {xv})", "dtype": "bf16",
                         "variant": "eager", "vocab": xv},
            lambda: generate(xcfg, args, dev, torch.bfloat16))
    out["done"] = True
    save()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

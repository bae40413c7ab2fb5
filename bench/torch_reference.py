#!/usr/bin/env python3
"""The plain references asyncrl is measured against, on the same device and model shape:
a PyTorch training step (forward, backward, AdamW) of HF transformers' Qwen2 in float32 and in
bf16 autocast, HF `generate()` in float32 and bf16, and the device's bf16 matmul peak.
Prints one JSON object (and writes it to --out). Used by bench/device_compare.py; needs
`torch` and `transformers` in the Python that runs it (never a dependency of asyncrl itself).

  python3 bench/torch_reference.py --device cuda --hidden 896 --layers 24 --heads 14 \
      --kv-heads 2 --intermediate 4864 --vocab 100 --batch 128 --prompt 16 --new-tokens 48

The model is built from a config with random weights (nothing is downloaded). Tokens of a
training step are batch * (prompt + new): every position is trained on, as in a plain LM step.
"""
import argparse
import json
import time

import torch
import transformers
from transformers import Qwen2Config, Qwen2ForCausalLM


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def reset_peak(dev):
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)


def peak_bytes(dev):
    return torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else None


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


def train_step(cfg, args, dev, bf16):
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    x = torch.randint(3, cfg.vocab_size, (args.batch, args.prompt + args.new_tokens), device=dev)
    reset_peak(dev)
    times = []
    for step in range(args.steps + 1):  # the first step warms up
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync(dev)
        if step > 0:
            times.append(time.perf_counter() - t0)
    s = sorted(times)[len(times) // 2]
    n_params = sum(p.numel() for p in model.parameters())
    tokens = args.batch * (args.prompt + args.new_tokens)
    return {"precision": "bf16_autocast" if bf16 else "float32", "step_s": s,
            "tokens_per_s": tokens / s, "model_tflops": 6 * n_params * tokens / s / 1e12,
            "cuda_peak_allocated_bytes": peak_bytes(dev)}


def generate(cfg, args, dev, dtype):
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).to(dev, dtype)
    model.eval()
    ids = torch.randint(3, cfg.vocab_size, (args.batch, args.prompt), device=dev)
    kw = dict(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, do_sample=True,
              temperature=1.0, top_k=0, pad_token_id=0)
    reset_peak(dev)
    with torch.no_grad():
        model.generate(ids, attention_mask=torch.ones_like(ids), **kw)  # warm-up
        times = []
        for _ in range(args.reps):
            sync(dev)
            t0 = time.perf_counter()
            out = model.generate(ids, attention_mask=torch.ones_like(ids), **kw)
            sync(dev)
            times.append(time.perf_counter() - t0)
            assert out.shape[1] == args.prompt + args.new_tokens, out.shape
    s = sorted(times)[len(times) // 2]
    return {"dtype": "bf16" if dtype == torch.bfloat16 else "float32", "s": s,
            "tokens_per_s": args.batch * args.new_tokens / s,
            "cuda_peak_allocated_bytes": peak_bytes(dev)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--hidden", type=int, default=896)
    p.add_argument("--layers", type=int, default=24)
    p.add_argument("--heads", type=int, default=14)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--intermediate", type=int, default=4864)
    p.add_argument("--vocab", type=int, default=100)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--prompt", type=int, default=16)
    p.add_argument("--new-tokens", type=int, default=48)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--matmul", type=int, default=8192)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--out", default="")
    args = p.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    cfg = Qwen2Config(vocab_size=args.vocab, hidden_size=args.hidden,
                      intermediate_size=args.intermediate, num_hidden_layers=args.layers,
                      num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
                      max_position_embeddings=max(128, args.prompt + args.new_tokens),
                      tie_word_embeddings=True, rope_theta=10000.0)
    out = {"benchmark": "torch_reference", "device": str(dev),
           "device_name": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu",
           "torch": torch.__version__, "transformers": transformers.__version__,
           "parameters": sum(p.numel() for p in Qwen2ForCausalLM(cfg).parameters()),
           "matmul_peak_tflops": {"bf16": matmul_tflops(dev, torch.bfloat16, args.matmul),
                                  "float32": matmul_tflops(dev, torch.float32, args.matmul),
                                  "n": args.matmul},
           "train": [], "generate": []}
    for bf16 in (False, True):
        try:
            out["train"].append(train_step(cfg, args, dev, bf16))
        except Exception as e:  # noqa: BLE001 - an OOM on one row must not lose the others
            out["train"].append({"precision": "bf16_autocast" if bf16 else "float32",
                                 "error": str(e)[:300]})
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    for dtype in (torch.float32, torch.bfloat16):
        try:
            out["generate"].append(generate(cfg, args, dev, dtype))
        except Exception as e:  # noqa: BLE001
            out["generate"].append({"dtype": str(dtype), "error": str(e)[:300]})
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

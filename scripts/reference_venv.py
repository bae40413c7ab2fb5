#!/usr/bin/env python3
"""A Python with torch 2.11.0 and transformers, the plain references of the device benchmark
(bench/torch_reference.py, bench/device_compare.py), in a virtualenv in the cache outside the
checkout. torch comes from the same pinned wheel as the libtorch build (scripts/fetch_libtorch.py;
the NVIDIA wheels libtorch_cuda links against too), so both measure one libtorch; the rest are
pinned PyPI versions (about 100 MB besides torch). Not a dependency of asyncrl: only the benchmark's reference needs it.

Prints the venv's python on its last line. Idempotent (a marker holds what was installed).
  scripts/reference_venv.py      # -> ~/.cache/asyncrl/reference-venv-2.11.0/bin/python
"""
import os
import subprocess
import sys

from fetch_libtorch import WHEELS
from pypi_wheels import cache_dir, die, fetch_wheel

WHO = "reference_venv"
# What torch imports, and transformers (whose own dependencies pip resolves), pinned as
# resolved on 2026-11-26.
PACKAGES = [
    "filelock==4.3.1", "fsspec==2026.9.0", "jinja2==3.1.6", "networkx==3.6.1", "sympy==1.14.0",
    "typing-extensions==4.16.0", "transformers==5.24.0",
    # The real clients and readers the ecosystem tests check asyncrl's output with (issue 40):
    # the OpenAI client (asyncrl serve), TensorBoard's event reader, SentencePiece, Arrow.
    "openai==3.57.0", "tensorboard==2.21.0", "sentencepiece==0.2.3", "pyarrow==26.0.1",
]

def main():
    venv = os.path.join(cache_dir(), "reference-venv-2.11.0")
    python = os.path.join(venv, "bin", "python")
    marker = os.path.join(venv, ".complete")
    want = "\n".join([sha for _, sha, _ in WHEELS] + PACKAGES) + "\n"
    if os.path.exists(marker) and open(marker).read() == want:
        print(python)
        return
    wheels = [fetch_wheel(WHO, rel, sha) for rel, sha, _ in WHEELS]
    print(f"{WHO}: creating {venv}", file=sys.stderr, flush=True)
    steps = [
        [sys.executable, "-m", "venv", "--clear", venv],
        # torch without its CUDA dependency packages: the CUDA toolkit provides cudart, cuBLAS,
        # cuDNN and NCCL, the NVIDIA wheels above the rest.
        [python, "-m", "pip", "install", "-q", "--no-deps"] + wheels,
        [python, "-m", "pip", "install", "-q"] + PACKAGES,
        [python, "-c", "import torch, transformers, openai, tensorboard, sentencepiece, pyarrow"],
    ]
    for cmd in steps:
        p = subprocess.run(cmd, stdout=sys.stderr)
        if p.returncode != 0:
            die(WHO, f"failed ({p.returncode}): {' '.join(cmd[:6])} ...")
    with open(marker, "w") as f:
        f.write(want)
    print(python)


if __name__ == "__main__":
    main()

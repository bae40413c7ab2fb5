#!/usr/bin/env python3
"""Unpacks libtorch 2.11.0 from the PyPI torch wheel into a cache outside the checkout, for
building asyncrl against libtorch 2.x (scripts/setup.sh with ASYNCRL_TORCH=pip).

The PyPI wheel is what a GPU user has: libtorch built with CUDA 13.0 (torch/lib, torch/include
and torch/share/cmake/Torch). It builds and runs its CPU path on a machine without a GPU, but
libtorch_cuda.so must still load, so three NVIDIA runtime libraries it links against come from
their PyPI wheels too (cuSPARSELt, NVSHMEM, cuFile; the CUDA toolkit provides cudart, cuBLAS,
cuDNN and NCCL). Everything is pinned by sha256 and laid out as pip would (torch/lib next to
nvidia/*/lib), so libtorch's own RPATH finds the NVIDIA libraries.

Prints the directory to pass as Torch_DIR on its last line. Idempotent: an unpacked prefix with
a complete marker is reused. Exit 1 with a message on a network or checksum failure.

  scripts/fetch_libtorch.py            # -> $ASYNCRL_CACHE/libtorch-2.11.0-cu130/torch/share/cmake/Torch
"""
import os
import shutil
import sys
import zipfile

from pypi_wheels import cache_dir, die, fetch_wheel

VERSION = "2.11.0"
WHO = "fetch_libtorch"
# (path under files.pythonhosted.org/packages, sha256, members to unpack)
WHEELS = [
    ("8c/8b/d7be22fbec9ffee6cff31a39f8750d4b3a65d349a286cf4aec74c2375662/"
     "torch-2.11.0-cp311-cp311-manylinux_2_28_x86_64.whl",
     "7aa2f9bbc6d4595ba72138026b2074be1233186150e9292865e04b7a63b8c67a",
     ("torch/lib/", "torch/include/", "torch/share/")),
    ("fd/53/43b0d71f4e702fa9733f8b4571fdca50a8813f1e450b656c239beff12315/"
     "nvidia_cusparselt_cu13-0.8.0-py3-none-manylinux2014_x86_64.whl",
     "25e30a8a7323935d4ad0340b95a0b69926eee755767e8e0b1cf8dd85b197d3fd",
     ("nvidia/cusparselt/lib/",)),
    ("3c/35/a9bf80a609e74e3b000fef598933235c908fcefcef9026042b8e6dfde2a9/"
     "nvidia_nvshmem_cu13-3.4.5-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "290f0a2ee94c9f3687a02502f3b9299a9f9fe826e6d0287ee18482e78d495b80",
     ("nvidia/nvshmem/lib/",)),
    ("3f/70/4f193de89a48b71714e74602ee14d04e4019ad36a5a9f20c425776e72cd6/"
     "nvidia_cufile-1.15.1.6-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "08a3ecefae5a01c7f5117351c64f17c7c62efa5fffdbe24fc7d298da19cd0b44",
     ("nvidia/cu13/lib/",)),
]
# Not needed by a C++ program (the Python extension's library): left out of the prefix.
SKIP = ("torch/lib/libtorch_python.so",)


def unpack(whl, prefixes, dest):
    with zipfile.ZipFile(whl) as z:
        for info in z.infolist():
            name = info.filename
            if not name.startswith(prefixes) or name in SKIP or name.endswith("/"):
                continue
            target = os.path.join(dest, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, "wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            # Wheels keep the unix mode in the high bits; shared libraries need +x for some tools.
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode)


def main():
    root = os.path.join(cache_dir(), f"libtorch-{VERSION}-cu130")
    marker = os.path.join(root, ".complete")
    want = "\n".join(sha for _, sha, _ in WHEELS) + "\n"
    torch_dir = os.path.join(root, "torch", "share", "cmake", "Torch")
    if os.path.exists(marker) and open(marker).read() == want:
        print(f"{WHO}: libtorch {VERSION} present in {root}", file=sys.stderr)
        print(torch_dir)
        return
    wheels = [(fetch_wheel(WHO, rel, sha), members) for rel, sha, members in WHEELS]
    tmp = root + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    for whl, members in wheels:
        print(f"{WHO}: unpacking {os.path.basename(whl)}", file=sys.stderr, flush=True)
        unpack(whl, members, tmp)
    if not os.path.exists(os.path.join(tmp, "torch", "share", "cmake", "Torch", "TorchConfig.cmake")):
        die(WHO, "the torch wheel has no torch/share/cmake/Torch/TorchConfig.cmake")
    with open(os.path.join(tmp, ".complete"), "w") as f:
        f.write(want)
    shutil.rmtree(root, ignore_errors=True)
    os.replace(tmp, root)
    print(f"{WHO}: libtorch {VERSION} unpacked in {root}", file=sys.stderr)
    print(torch_dir)


if __name__ == "__main__":
    main()

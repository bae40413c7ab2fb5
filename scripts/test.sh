#!/usr/bin/env bash
# Installs what is missing, builds (Release), and runs every test through ctest: the whole suite
# against Debian's libtorch 1.13 (build/), and, where the CUDA toolkit is installed, the unit
# tests against libtorch 2.11 from the PyPI torch wheel (build-torch2/, scripts/setup.sh with
# ASYNCRL_TORCH=pip), whose Python also serves as the reference of the device benchmark's test;
# then every fuzz target over its committed corpus, under ASan and UBSan (scripts/fuzz.sh). The
# include layering is checked first (scripts/check_layers.py).
#   scripts/test.sh [extra ctest args for the whole suite, e.g. -L unit]
# Env: ASYNCRL_TORCH2=auto|on|off (default auto: on when nvcc is found).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
start=$(date +%s)
say() { echo "== test.sh [$(( $(date +%s) - start ))s] $*"; }

torch2="${ASYNCRL_TORCH2:-auto}"
if [ "$torch2" = auto ]; then
  torch2=off
  if command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then torch2=on; fi
fi

say "build against Debian's libtorch 1.13 (build/)"
"$ROOT/scripts/setup.sh" -DASYNCRL_BUILD_TESTS=ON
if [ "$torch2" = on ]; then
  say "build against libtorch 2.11 from PyPI (build-torch2/): the unit tests and what they run"
  ASYNCRL_TORCH=pip ASYNCRL_SKIP_INSTALL=1 ASYNCRL_BUILD_DIR="$ROOT/build-torch2" \
    ASYNCRL_TARGET=asyncrl_tests "$ROOT/scripts/setup.sh" -DASYNCRL_BUILD_TESTS=ON \
    -DASYNCRL_BUILD_BENCH=OFF
  say "reference Python (torch 2.11 from the same wheel, transformers) for the device benchmark"
  if ref="$(python3 "$ROOT/scripts/reference_venv.py" | tail -n 1)"; then
    export ASYNCRL_REFERENCE_PYTHON="$ref"
  else
    say "WARNING: no reference Python; bench_device_compare_cpu runs without the PyTorch/HF reference"
  fi
else
  say "libtorch 2.x build skipped (ASYNCRL_TORCH2=off, or no CUDA toolkit: nvcc not found)"
fi

status=0
say "layering: no upward or sideways include (scripts/check_layers.py)"
python3 "$ROOT/scripts/check_layers.py" || status=1
say "whole suite, libtorch 1.13"
(cd "${ASYNCRL_BUILD_DIR:-$ROOT/build}" && ctest --output-on-failure -j "$(nproc)" --timeout 1200 "$@") ||
  status=1
if [ "$torch2" = on ]; then
  say "unit tests, libtorch 2.11"
  (cd "$ROOT/build-torch2" && ctest --output-on-failure -j "$(nproc)" --timeout 1200 -L unit) || status=1
fi
say "fuzz corpora replayed under ASan and UBSan (clang, build-fuzz/)"
"$ROOT/scripts/fuzz.sh" replay || status=1
say "done: $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status

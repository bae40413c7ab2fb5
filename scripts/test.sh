#!/usr/bin/env bash
# Installs what is missing, builds (Release), and runs every test through ctest.
#   scripts/test.sh [extra ctest args, e.g. -L unit]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh" -DASYNCRL_BUILD_TESTS=ON
cd "${ASYNCRL_BUILD_DIR:-$ROOT/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 1200 "$@"

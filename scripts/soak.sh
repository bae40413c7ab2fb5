#!/usr/bin/env bash
# A long chaos soak (issue 27, not CI): `asyncrl chaos` repeats its whole series of fault rounds
# (every fault kind, then all at once) in one process until MINUTES have passed, checking the
# invariants after each round, and reports the faults injected and recovered, the groups lost
# and duplicated, and the resident memory at the start, after the first series and at the end
# (it fails when the memory grew by more than --max-rss-growth-mb, 256 MiB by default).
#   scripts/soak.sh [MINUTES=30] [CONFIG=configs/chaos/base.yaml] [key=value...]
# Results: <run_dir>/chaos.json (run_dir: runs/soak unless overridden) and the printed table.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MINUTES="${1:-30}"
CONFIG="${2:-$ROOT/configs/chaos/base.yaml}"
shift $(( $# > 2 ? 2 : $# ))
BIN="${ASYNCRL_BIN:-$ROOT/build/asyncrl}"
[ -x "$BIN" ] || { echo "soak: $BIN is missing (scripts/setup.sh builds it)" >&2; exit 2; }
exec "$BIN" chaos --config "$CONFIG" --minutes "$MINUTES" runtime.run_dir="$ROOT/runs/soak" "$@"

#!/usr/bin/env bash
# libFuzzer targets for every decoder of outside bytes (tests/fuzz/), built with clang, ASan and
# UBSan in their own build dir (build-fuzz, about 2 minutes on 2 cores).
#   scripts/fuzz.sh replay                   each target once over its corpus (CI; seconds)
#   scripts/fuzz.sh run SECONDS [TARGET...]  fuzz each target (default: all) for SECONDS; new
#                                            inputs go to build-fuzz/found/<target>, crashes to
#                                            build-fuzz/crashes/<target>; a summary line each
# Env: ASYNCRL_FUZZ_DIR (default build-fuzz). Exits non-zero on any crash, leak, timeout or
# sanitizer report. A crash's input belongs in tests/fuzz/corpus/<target>/ once it is fixed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="${ASYNCRL_FUZZ_DIR:-$ROOT/build-fuzz}"
TARGETS=(safetensors checkpoint weights scorer_frames config tokenizer jsonl console)
MODE="${1:-}"
case "$MODE" in
  replay | run) ;;
  *) echo "usage: scripts/fuzz.sh replay | run SECONDS [TARGET...]" >&2; exit 2 ;;
esac
if ! command -v clang++ > /dev/null; then
  echo "scripts/fuzz.sh: clang++ is missing (Debian: apt-get install clang)" >&2
  exit 2
fi
mkdir -p "$DIR"
cmake -S "$ROOT/tests/fuzz" -B "$DIR" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
  > "$DIR/configure.log" 2>&1 || { cat "$DIR/configure.log"; exit 1; }
cmake --build "$DIR" -j "$(nproc)" > "$DIR/build.log" 2>&1 || { tail -40 "$DIR/build.log"; exit 1; }
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"

status=0
if [ "$MODE" = replay ]; then
  for t in "${TARGETS[@]}"; do
    # -runs=0 with directories: every file once. A crash names the file.
    if out=$("$DIR/fuzz_$t" -runs=0 "$ROOT/tests/fuzz/corpus/$t" 2>&1); then
      echo "fuzz replay: $t: $(grep -o 'Done [0-9]* runs' <<< "$out")"
    else
      echo "fuzz replay: $t FAILED"; tail -40 <<< "$out"; status=1
    fi
  done
  exit $status
fi

SECONDS_EACH="${2:?scripts/fuzz.sh run SECONDS [TARGET...]}"
shift 2
[ $# -gt 0 ] && TARGETS=("$@")
for t in "${TARGETS[@]}"; do
  mkdir -p "$DIR/found/$t" "$DIR/crashes/$t"
  # -timeout: an input that takes over 10 s is a hang; -rss_limit_mb: a huge allocation is a
  # finding too (a length from the input trusted before it is checked).
  if "$DIR/fuzz_$t" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$DIR/crashes/$t/" -print_final_stats=1 \
      "$DIR/found/$t" "$ROOT/tests/fuzz/corpus/$t" > "$DIR/$t.log" 2>&1; then
    echo "fuzz run: $t: $(grep -o 'stat::number_of_executed_units: *[0-9]*' "$DIR/$t.log" |
      grep -o '[0-9]*$') inputs in ${SECONDS_EACH} s, corpus $(ls "$DIR/found/$t" | wc -l), no crash"
  else
    echo "fuzz run: $t FAILED (log $DIR/$t.log, input under $DIR/crashes/$t/):"
    grep -E "ERROR|SUMMARY|#[0-9]+ 0x" "$DIR/$t.log" | head -20
    status=1
  fi
done
exit $status

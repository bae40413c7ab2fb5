# run_bounded IDLE_S CAP_S OUT ERR CMD...: runs CMD with stdout in OUT and stderr in ERR (ERR
# "-": both in OUT), and
# returns its exit code, or 124 after killing it when neither file has grown for IDLE_S seconds
# (a hang: asyncrl prints a progress line every few steps and logs as it goes) or when it has
# run CAP_S seconds in all. Sourced by the multi-process tests.
#
# Why not `timeout N`: a fixed limit measures speed, and a slow or shared machine fails a test
# that was progressing (issue 40: hf_e2e's SFT step hit a fixed 240 s at 161-519 tokens/s).
# IDLE_S guards against hangs; CAP_S only against a run that keeps printing without end, so it
# is generous.
run_bounded() {
  local idle=$1 cap=$2 out=$3 err=$4
  shift 4
  if [[ $err == - ]]; then
    err=$out
    "$@" >"$out" 2>&1 &
  else
    "$@" >"$out" 2>"$err" &
  fi
  local pid=$! start=$SECONDS last=$SECONDS size="" now_size
  while kill -0 "$pid" 2>/dev/null; do
    now_size="$(stat -c %s "$out" "$err" 2>/dev/null | tr '\n' ' ')"
    [[ "$now_size" != "$size" ]] && size=$now_size last=$SECONDS
    if ((SECONDS - last >= idle || SECONDS - start >= cap)); then
      echo "run_bounded: $1 stopped: $((SECONDS - last)) s without output, $((SECONDS - start)) s in all (limits $idle s idle, $cap s total)" >&2
      pkill -9 -P "$pid" 2>/dev/null || true
      kill -9 "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return 124
    fi
    sleep 1
  done
  local rc=0
  wait "$pid" || rc=$?
  return "$rc"
}

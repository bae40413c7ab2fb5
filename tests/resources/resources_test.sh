#!/usr/bin/env bash
# Resources that run out (ctest label `resources`). Every process and mount this script makes is
# removed on exit, and every wait is bounded.
#
# usage: resources_test.sh ASYNCRL WORK_DIR CASE
#   disk_full  the run dir is a 24 MiB tmpfs. Once the first checkpoint is written, a file fills
#              the rest, so the next checkpoint's write fails with ENOSPC. The run must stop
#              with status failed, exit 1, name the error and `resume with`; leave no temporary
#              file and no truncated summary.json or ledger.json; keep the last good checkpoint
#              as the newest. With the space freed, `train --resume` must end bitwise equal
#              (params_sha256) to the same run never interrupted.
#   model_too_big  a model.init of 245 B parameters, then a model.path whose config.json says
#              the same: each fails at once (no allocation, exit 1) with an error that names
#              the keys that size the model and the ones that change the need
#
# disk_full needs root (mount); exits 77 (ctest: skipped) without it.
set -euo pipefail

BIN=$(readlink -f "${1:?asyncrl binary}")
WORK=${2:?work dir}
CASE=${3:?case}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CFG=$ROOT/configs/chaos/base.yaml
# Periodic, so that a resume is bitwise equal to the uninterrupted run.
COMMON=(checkpoint.every_steps=4 checkpoint.keep=2 async_training.mode=periodic
        runtime.progress_timeout_s=60)

MNT=""
extra_cleanup() {
  if [[ -n "$MNT" ]] && mountpoint -q "$MNT"; then umount -l "$MNT" || true; fi
}

source "$ROOT/tests/multiprocess_lib.sh"

sha_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["params_sha256"])' "$1"; }

case "$CASE" in
  disk_full)
    [[ $(id -u) -eq 0 ]] || { echo "SKIP: mounting a tmpfs needs root"; exit 77; }
    MNT=$WORK/mnt
    mkdir -p "$MNT"
    mount -t tmpfs -o size=24m tmpfs "$MNT" || { MNT=""; echo "SKIP: cannot mount a tmpfs"; exit 77; }
    RUN=$MNT/run
    # 400 steps: far more than the time until the disk fills.
    TRAIN_TIMEOUT=120
    timeout "$TRAIN_TIMEOUT" "$BIN" train -c "$CFG" "${COMMON[@]}" trainer.total_steps=400 \
      runtime.run_dir="$RUN" >"$WORK/full.out" 2>"$WORK/full.log" &
    TRAIN_PID=$!
    pids+=("$TRAIN_PID")
    for _ in $(seq 600); do
      [[ -f $RUN/checkpoints/step-00000004.ckpt ]] && break
      kill -0 "$TRAIN_PID" 2>/dev/null || fail "train exited before its first checkpoint"
      sleep 0.1
    done
    [[ -f $RUN/checkpoints/step-00000004.ckpt ]] || fail "no first checkpoint in 60 s"
    # Another process takes every free block.
    dd if=/dev/zero of="$MNT/filler" bs=64k 2>/dev/null || true
    echo "disk full at step $(steps_of "$RUN"): $(df -k "$MNT" | awk 'NR==2 {print $4}') KiB free"
    rc=0
    wait "$TRAIN_PID" || rc=$?
    [[ $rc -eq 1 ]] || fail "train exited with $rc on a full disk, expected 1 (failed)"
    grep -q "No space left on device" "$WORK/full.log" || fail "the error does not say the disk is full"
    grep -q "resume with: asyncrl train --resume $RUN" "$WORK/full.log" || fail "no 'resume with' line"
    python3 - "$WORK/full.out" <<'PY' || fail "the summary on stdout does not say failed"
import json, sys
s = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
assert s["status"] == "failed" and not s["ok"], s
assert "No space left on device" in s["error"], s["error"]
print("ok: stdout summary:", s["error"])
PY
    # No temporary left, and the newest checkpoint is a complete one (resume checks its SHA-256).
    leftovers=$(find "$RUN" -name '*.tmp*' | wc -l)
    [[ $leftovers -eq 0 ]] || fail "temporary files left: $(find "$RUN" -name '*.tmp*')"
    for f in summary.json ledger.json; do
      [[ ! -e $RUN/$f ]] || python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$RUN/$f" ||
        fail "$f is not valid JSON after the disk filled"
    done
    newest=$(ls "$RUN/checkpoints" | sort | tail -1)
    echo "newest checkpoint: $newest"
    # The space comes back; the resume runs to 24 steps.
    rm -f "$MNT/filler"
    timeout 120 "$BIN" train --resume "$RUN" trainer.total_steps=24 \
      >"$WORK/resume.out" 2>"$WORK/resume.log" || fail "the resume failed"
    from=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["resumed_from_step"])' \
      "$RUN/summary.json")
    [[ "step-$(printf %08d "$from").ckpt" == "$newest" ]] ||
      fail "the resume started from step $from, not from the newest checkpoint $newest"
    # The reference: the same 24 steps, never interrupted, on an ordinary directory.
    timeout 120 "$BIN" train -c "$CFG" "${COMMON[@]}" trainer.total_steps=24 \
      runtime.run_dir="$WORK/ref" >"$WORK/ref.out" 2>"$WORK/ref.log" || fail "the reference run failed"
    a=$(sha_of "$RUN/summary.json")
    b=$(sha_of "$WORK/ref/summary.json")
    [[ -n "$a" && "$a" == "$b" ]] || fail "resumed after a full disk ($a) != uninterrupted ($b)"
    python3 "$ROOT/tests/check_run.py" "$RUN" || fail "accounting after the resume"
    echo "ok: failed resumably on a full disk; resumed from $newest to params_sha256 $a, as uninterrupted"
    ;;
  model_too_big)
    BIG=(model.init.hidden_size=16384 model.init.intermediate_size=65536
         model.init.num_hidden_layers=64 model.init.num_attention_heads=64
         model.init.num_key_value_heads=8)
    rc=0
    timeout 60 "$BIN" train -c "$CFG" "${BIG[@]}" runtime.run_dir="$WORK/init" \
      >"$WORK/init.out" 2>"$WORK/init.log" || rc=$?
    [[ $rc -eq 1 ]] || fail "a 245 B-parameter model.init: exit $rc, expected 1"
    for want in "does not fit in host memory" "model.init (hidden_size 16384" \
        "model.init.hidden_size" "rollout.num_workers" "trainer.precision=bf16"; do
      grep -qF "$want" "$WORK/init.log" || fail "the error does not say '$want'"
    done
    [[ ! -d $WORK/init/checkpoints ]] || fail "the run started anyway"
    # model.path: a real model directory whose config.json claims the same sizes; refused from
    # config.json alone, before its weights are read.
    timeout 60 "$BIN" train -c "$CFG" trainer.total_steps=1 runtime.eval_after=false \
      runtime.run_dir="$WORK/small" >/dev/null 2>"$WORK/small.log" || fail "the small run failed"
    cp -r "$WORK/small/final" "$WORK/bigmodel"
    python3 - "$WORK/bigmodel/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=16384, intermediate_size=65536, num_hidden_layers=64,
         num_attention_heads=64, num_key_value_heads=8)
json.dump(c, open(sys.argv[1], "w"))
PY
    rc=0
    timeout 60 "$BIN" train -c "$CFG" model.path="$WORK/bigmodel" runtime.run_dir="$WORK/path" \
      >"$WORK/path.out" 2>"$WORK/path.log" || rc=$?
    [[ $rc -eq 1 ]] || fail "a 245 B-parameter model.path: exit $rc, expected 1"
    for want in "does not fit in host memory" "model.path $WORK/bigmodel (config.json:" \
        "smaller model.path"; do
      grep -qF "$want" "$WORK/path.log" || fail "the error does not say '$want'"
    done
    echo "ok: $(head -c 200 "$WORK/init.log")..."
    ;;
  *)
    echo "unknown case $CASE"; exit 2 ;;
esac

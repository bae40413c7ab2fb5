#!/usr/bin/env bash
# The kill -9 loop with tool calls in flight (ctest chaos_kill9_tools): configs/chaos/tools.yaml,
# whose episodes wait on the calculator (5 ms median latency), is killed with SIGKILL at random
# moments and resumed, and must end bitwise equal to an uninterrupted run (tests/kill9_loop.sh
# checks params_sha256, the ledger and the metrics). An episode waiting on its tool when the
# process dies is in no checkpoint: its group is regenerated from the prompt on resume
# (docs/episodes.md), and its tool calls are issued again from the regenerated turns.
#
# usage: kill9_tools.sh ASYNCRL WORK_DIR [SEED] [KILLS] [STEPS]
set -euo pipefail
BIN=${1:?asyncrl binary}
WORK=${2:?work dir}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CFG=$ROOT/configs/chaos/tools.yaml
mkdir -p "$WORK"
source "$ROOT/tests/bounded.sh"
# A warm start on tool traces (about 20 s): a model from scratch never writes a <<call>>; after
# 60 steps its greedy episodes call the tool but its sampled ones mostly do not.
# Each command is bounded by progress (tests/bounded.sh: 300 s without output is a hang), not by
# a fixed time that a slow machine would fail.
run_bounded 300 1500 "$WORK/sft.log" - "$BIN" sft -c "$CFG" sft.steps=300 sft.eval_every=1000 \
  sft.stop_at_accuracy=0 sft.log_every=10 runtime.run_dir="$WORK/sft" ||
  { echo "FAIL: warm start, see $WORK/sft.log"; exit 1; }
# The warm-started model must hold episodes of more than one turn, or this tests nothing.
run_bounded 300 1500 "$WORK/eval.log" - "$BIN" eval -m "$WORK/sft/final" -d "$WORK/sft/data/test.jsonl" --tool calculator \
  --max-turns 4 --max-new-tokens 12 --max-episode-tokens 48 --responses "$WORK/turns.jsonl" ||
  { echo "FAIL: eval, see $WORK/eval.log"; exit 1; }
multi=$(python3 -c 'import json,sys; print(sum(json.loads(l)["turns"] > 1 for l in open(sys.argv[1])))' "$WORK/turns.jsonl")
[[ $multi -gt 0 ]] || { echo "FAIL: the warm-started model ends every episode in one turn"; exit 1; }
echo "kill9_tools: warm start done; $multi of $(wc -l <"$WORK/turns.jsonl") test episodes call the tool"
# The same episodes through an external environment, the reference calculator of
# examples/env/ (docs/env-protocol.md): every response, turn count and (scorer) reward must
# equal the built-in calculator's (evaluation runs external episodes turn by turn, as training).
run_bounded 300 1500 "$WORK/eval_ext.log" - "$BIN" eval -m "$WORK/sft/final" -d "$WORK/sft/data/test.jsonl" --tool external \
  --env-command "/usr/bin/python3 $ROOT/examples/env/reference_env.py" \
  --max-turns 4 --max-new-tokens 12 --max-episode-tokens 48 --responses "$WORK/turns_ext.jsonl" ||
  { echo "FAIL: eval with the external environment, see $WORK/eval_ext.log"; exit 1; }
cmp -s "$WORK/turns.jsonl" "$WORK/turns_ext.jsonl" || {
  echo "FAIL: the reference environment's episodes differ from the calculator's:"
  diff "$WORK/turns.jsonl" "$WORK/turns_ext.jsonl" | head -5; exit 1; }
echo "kill9_tools: the reference environment's $(wc -l <"$WORK/turns_ext.jsonl") episodes equal the calculator's"
bash "$ROOT/tests/kill9_loop.sh" "$BIN" "$CFG" "$WORK/loop" "${3:-20261128}" "${4:-8}" \
  "${5:-40}" model.path="$WORK/sft/final"
# The training episodes (sampled) went past their first turn: the tool's answers were appended.
python3 - "$WORK/loop/reference/summary.json" "$("$BIN" config -c "$CFG" --get rollout.n)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
calls = sum(r["env_calls"] for r in s["rollouters"])
tokens = sum(r["env_tokens"] for r in s["rollouters"])
episodes = s["groups_generated"] * int(sys.argv[2])
print("kill9_tools: %d tool calls, %d tool tokens appended, %d episodes" % (calls, tokens, episodes))
if tokens == 0 or calls <= episodes:
    sys.exit("FAIL: the episodes did not go past their first turn: nothing was tested mid-tool")
PY
# Theorem 1 with episodes: the same run in sync mode (one rollouter's whole batch, then the
# update) ends with the weights of the periodic reference, whose two rollouters stream episodes
# that wait on the tool with a log-normal latency, so they finish in another order.
run_bounded 300 1500 "$WORK/sync.log" - "$BIN" train -c "$CFG" trainer.total_steps="${5:-40}" \
  runtime.log_level=warn model.path="$WORK/sft/final" async_training.mode=sync \
  runtime.run_dir="$WORK/sync" || { echo "FAIL: the sync run, see $WORK/sync.log"; exit 1; }
python3 - "$WORK/loop/reference/summary.json" "$WORK/sync/summary.json" <<'PY'
import json, sys
p, s = (json.load(open(f)) for f in sys.argv[1:3])
print("kill9_tools: periodic %s, sync %s (%d and %d deliveries to the trainer)" %
      (p["params_sha256"][:16], s["params_sha256"][:16], p["trainer"]["deliveries"],
       s["trainer"]["deliveries"]))
if p["params_sha256"] != s["params_sha256"]:
    sys.exit("FAIL: periodic and sync ended with different weights (Theorem 1, with episodes)")
if p["trainer"]["deliveries"] <= s["trainer"]["deliveries"]:
    sys.exit("FAIL: periodic did not stream: nothing was compared")
PY
# A short run whose episodes go to an external environment (the reference calculator process,
# one per environment worker): its turns go past the first, no call fails, and the run's
# evaluations (before and after) ran their episodes through the environment as well.
run_bounded 300 1500 "$WORK/external.log" - "$BIN" train -c "$CFG" model.path="$WORK/sft/final" \
  runtime.run_dir="$WORK/external" trainer.total_steps=6 env.kind=external \
  env.latency_median_ms=0 runtime.eval_before=true runtime.eval_after=true \
  env.command="/usr/bin/python3 $ROOT/examples/env/reference_env.py" ||
  { echo "FAIL: the run with an external environment, see $WORK/external.log"; exit 1; }
python3 - "$WORK/external/summary.json" "$("$BIN" config -c "$CFG" --get rollout.n)" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
calls = sum(r["env_calls"] for r in s["rollouters"])
failures = sum(r["env_failures"] for r in s["rollouters"])
episodes = s["groups_generated"] * int(sys.argv[2])
print("kill9_tools: external environment: %d calls for %d episodes, %d failed, eval %s -> %s" %
      (calls, episodes, failures, s.get("initial_eval_accuracy"), s.get("final_eval_accuracy")))
if calls <= episodes or failures:
    sys.exit("FAIL: the external environment's episodes did not go past one turn, or calls failed")
if s.get("initial_eval_accuracy") is None or s.get("final_eval_accuracy") is None:
    sys.exit("FAIL: the run's evaluations did not run")
if s["groups_generated"] != s["groups_trained"] + s["groups_dropped"] + s["groups_in_flight"]:
    sys.exit("FAIL: the ledger lost groups")
PY

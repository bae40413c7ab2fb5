#!/usr/bin/env bash
# The Hugging Face path end to end on a tiny model: ctest label `hf`.
#   hf_test.sh ASYNCRL WORK_DIR e2e
# 1. `asyncrl sft` a fresh Qwen2-architecture model with a real tokenizer.json (Qwen2.5's cut to
#    2048 tokens, tests/fixtures/hf_tiny) and Qwen's chat template on a GSM8K-format JSONL; its
#    final/ is an HF-layout model dir whose tokenizer files are byte-identical to the source.
# 2. `asyncrl train model.path=<that dir> data.train_files=<jsonl>` with the reward scored by the
#    Python reference scorer (reward.function=external): completes, every group accounted for,
#    no scorer failure, no scorer process left.
# 3. `asyncrl tokenize` round-trips the dataset's text; `asyncrl score` takes text and gives
#    n-1 log-probs for the n tokens tokenize gives; `asyncrl generate` stops at <|im_end|>.
set -euo pipefail

BIN=$(readlink -f "${1:?asyncrl binary}")
WORK=${2:?work dir}
CASE=${3:?case}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CFG=$ROOT/configs/gsm8k_tiny_hf.yaml
COMMON=()
# shellcheck source=../multiprocess_lib.sh
source "$ROOT/tests/multiprocess_lib.sh"
# shellcheck source=../bounded.sh
source "$ROOT/tests/bounded.sh"
cd "$ROOT"  # the config's fixture paths are relative to the repo root

[[ $CASE == e2e ]] || fail "unknown case '$CASE'"
PY=/usr/bin/python3
$PY -c 'import msgpack' 2>/dev/null || fail "$PY cannot import msgpack (apt install python3-msgpack)"

# 1. warm start: writes an HF-layout model dir
# Bounded by progress (tests/bounded.sh): 300 s without output is a hang; 1500 s in all.
run_bounded 300 1500 "$WORK/sft.out" "$WORK/sft.log" \
  "$BIN" sft --config "$CFG" runtime.run_dir="$WORK/sft" sft.steps=30 sft.log_every=1 ||
  fail "sft exited $?"
MODEL=$WORK/sft/final
for f in tokenizer.json tokenizer_config.json; do
  cmp -s "$MODEL/$f" "tests/fixtures/hf_tiny/$f" || fail "$MODEL/$f differs from the source tokenizer"
done
$PY - "$MODEL/config.json" <<'PYEOF' || fail "config.json"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["vocab_size"] == 2070, c["vocab_size"]  # 2048 BPE tokens + 22 added
PYEOF

# 2. RL from that model dir, Python reward. The run's scorers inherit ASYNCRL_TEST_RUN, so that
# the check below finds this run's leftovers and not the scorers of tests running beside it
# (ctest -j runs tests/test_external_scorer.cpp's, with the same script, concurrently).
TAG="hf_e2e_$$_$RANDOM"
ASYNCRL_TEST_RUN=$TAG run_bounded 300 1500 "$WORK/rl.out" "$WORK/rl.log" \
  "$BIN" train --config "$CFG" model.tokenizer= model.path="$MODEL" \
  data.train_files=tests/fixtures/gsm8k/train.jsonl data.val_files=tests/fixtures/gsm8k/test.jsonl \
  trainer.total_steps=3 runtime.run_dir="$WORK/rl" reward.function=external \
  "reward.external.command=$PY examples/reward/gsm8k_scorer.py" || fail "train exited $?"
$PY - "$WORK/rl/summary.json" <<'PYEOF' || fail "summary"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ok"] and s["status"] == "completed", s["status"]
assert s["steps"] == 3 and s["trainer"]["steps"] == 3 and s["groups_trained"] > 0, s
r = s["reward"]
assert r["received"] == s["groups_generated"] and r["failures"] == 0 and r["timeouts"] == 0, r
assert all(v == 0 for k, v in r["scorer"].items() if k != "restarts"), r["scorer"]
assert s["groups_generated"] == s["groups_trained"] + s["groups_dropped"] + s["groups_in_flight"]
PYEOF
ours_left() {
  local p
  for p in $(pgrep -f "examples/reward/gsm8k_scorer.py"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "ASYNCRL_TEST_RUN=$TAG" && return 0
  done
  return 1
}
ours_left && fail "a scorer process outlived the run"

# 3. tokenize, score, generate on the trained model
head -20 tests/fixtures/gsm8k/test.jsonl | $PY -c '
import json, sys
for l in sys.stdin:
    e = json.loads(l)
    print(json.dumps({"text": e["question"] + "\n" + e["answer"]}, separators=(",", ":"), ensure_ascii=False))' >"$WORK/text.jsonl"
"$BIN" tokenize --model "$WORK/rl/final" --input "$WORK/text.jsonl" >"$WORK/ids.jsonl" \
  || fail "tokenize"
"$BIN" tokenize --model "$WORK/rl/final" --input "$WORK/ids.jsonl" --decode >"$WORK/back.jsonl" \
  || fail "tokenize --decode"
cmp -s "$WORK/text.jsonl" "$WORK/back.jsonl" || fail "tokenize did not round-trip"
"$BIN" score --model "$WORK/rl/final" --input "$WORK/text.jsonl" >"$WORK/scores.jsonl" \
  || fail "score"
$PY - "$WORK/ids.jsonl" "$WORK/scores.jsonl" <<'PYEOF' || fail "score vs tokenize"
import json, sys
ids = [json.loads(l)["ids"] for l in open(sys.argv[1])]
lps = [json.loads(l)["logprobs"] for l in open(sys.argv[2])]
assert len(ids) == len(lps) == 20
for i, l in zip(ids, lps):
    assert len(l) == len(i) - 1 and all(x <= 0 for x in l), (len(i), len(l))
    assert max(i) < 2070
PYEOF
"$BIN" generate --model "$WORK/rl/final" --prompt "Ana has 3 pens and gets 4 more. How many pens does Ana have now?" \
  --temperature 0 >"$WORK/gen.jsonl" || fail "generate"
$PY - "$WORK/gen.jsonl" <<'PYEOF' || fail "generate output"
import json, sys
g = json.loads(open(sys.argv[1]).readline())
assert g["finish"] in ("eos", "length"), g
assert "<|im_end|>" not in g["text"] and "<|im_start|>" not in g["text"], g["text"]
PYEOF
# --stream prints the same response, whole characters as they come (greedy: same tokens).
"$BIN" generate --model "$WORK/rl/final" --prompt "Ana has 3 pens and gets 4 more. How many pens does Ana have now?" \
  --temperature 0 --stream >"$WORK/stream.txt" || fail "generate --stream"
$PY - "$WORK/gen.jsonl" "$WORK/stream.txt" <<'PYEOF' || fail "generate --stream differs from generate"
import json, sys
g = json.loads(open(sys.argv[1]).readline())
s = open(sys.argv[2], encoding="utf-8").read()
assert s == g["text"] + "\n", (s, g["text"])
PYEOF
echo "PASS hf e2e"

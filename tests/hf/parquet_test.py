#!/usr/bin/env python3
"""Parquet in the Hugging Face hub's layout, end to end (ctest parquet_hub, label hf).

  parquet_test.py ASYNCRL_CLI SOURCE_DIR WORK_DIR

Writes a hub dataset directory with pyarrow (data/train-0000{0,1}-of-00002.parquet and
data/test-00000-of-00001.parquet; unicode strings; the keys problem/solution, not the defaults;
a verl-style copy with chat-message prompts and a reward_model struct), converts it with
scripts/parquet_to_jsonl.py and checks that `asyncrl data` sees exactly the written rows, in
order. Where asyncrl reads Parquet itself (-DASYNCRL_PARQUET=ON) the direct read must give the
same rows; where not, the error must name the conversion. Then damaged files: truncated, a
flipped footer, a flipped data page (with page CRCs), a missing key column: each error names
the file (and column, key and the columns there are).

Runs under the reference Python when this one has no pyarrow (tests/reference_python.py); exits
77 (skipped) when neither has it.
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reference_python  # noqa: E402

reference_python.need("pyarrow")
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

CLI, SRC, WORK = sys.argv[1], sys.argv[2], sys.argv[3]
CONVERT = os.path.join(SRC, "scripts", "parquet_to_jsonl.py")
failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


# Unicode of several kinds: accents, CJK, an emoji (outside the BMP), a combining mark, RTL,
# and JSON's own specials (quote, backslash, newline, tab).
TRAIN = [
    ("Combien font 2 + 3 ? Réponds vite ✓", "2 + 3 = 5\n#### 5"),
    ("数学：7×6 等于多少？", "7×6=42\n#### 42"),
    ("🙂 emoji: 10 - 4 = ?", "#### 6"),
    ("e\u0301 combining, \"quotes\", back\\slash,\ttab", "#### 1"),
    ("עברית: 9 / 3 = ?", "\\boxed{3}"),
]
TEST = [("Ελληνικά: 1 + 1 = ;", "#### 2"), ("last: 100 - 1", "#### 99")]


def write_hub(root):
    os.makedirs(os.path.join(root, "data"), exist_ok=True)
    shards = [("train-00000-of-00002", TRAIN[:3]), ("train-00001-of-00002", TRAIN[3:]),
              ("test-00000-of-00001", TEST)]
    for name, rows in shards:
        table = pa.table({"id": list(range(len(rows))), "problem": [q for q, _ in rows],
                          "solution": [a for _, a in rows]})
        # Two rows per row group: a shard with several row groups; page CRCs for the damage test.
        pq.write_table(table, os.path.join(root, "data", name + ".parquet"), row_group_size=2,
                       write_page_checksum=True)
    with open(os.path.join(root, "README.md"), "w") as f:
        f.write("---\nconfigs: [{config_name: default, data_files: data/*}]\n---\n")


def write_verl(root):
    """verl's preprocessed layout: prompt as chat messages, reward_model.ground_truth."""
    os.makedirs(root, exist_ok=True)
    prompts = [[{"role": "system", "content": "Réfléchis."}, {"role": "user", "content": q}]
               for q, _ in TRAIN]
    truths = [{"ground_truth": a.split("#### ")[-1] if "####" in a else "3", "style": "rule"}
              for _, a in TRAIN]
    pq.write_table(pa.table({"data_source": ["x"] * len(TRAIN), "prompt": prompts,
                             "reward_model": truths}), os.path.join(root, "train.parquet"))


def asyncrl_data(train, test, out, keys=("problem", "solution")):
    return run([CLI, "data", "--out", out, f"data.train_path={train}", f"data.test_path={test}",
                f"data.prompt_key={keys[0]}", f"data.answer_key={keys[1]}"])


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def convert(path, split, out, keys=("problem", "solution")):
    return run([sys.executable, CONVERT, path, "--split", split, "--out", out,
                "--prompt-key", keys[0], "--answer-key", keys[1]])


shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)
hub = os.path.join(WORK, "hub")
write_hub(hub)

# 1. Converted: the script's JSONL, read by asyncrl, written back by `asyncrl data`.
for split in ("train", "test"):
    r = convert(hub, split, os.path.join(WORK, split + ".jsonl"))
    check(r.returncode == 0, f"convert {split}: {r.stderr.strip()}")
r = asyncrl_data(os.path.join(WORK, "train.jsonl"), os.path.join(WORK, "test.jsonl"),
                 os.path.join(WORK, "out_converted"))
check(r.returncode == 0, f"asyncrl data on the converted JSONL: {r.stderr.strip()}")
for split, rows in (("train", TRAIN), ("test", TEST)):
    got = [(o["question"], o["answer"]) for o in
           read_jsonl(os.path.join(WORK, "out_converted", split + ".jsonl"))]
    check(got == rows, f"converted {split}: the {len(rows)} rows in order, unicode intact")

# 2. Direct: asyncrl reads the hub directory (train_path and test_path both name it).
r = asyncrl_data(hub, hub, os.path.join(WORK, "out_direct"))
built_in = r.returncode == 0
if built_in:
    for split in ("train", "test"):
        a = read_jsonl(os.path.join(WORK, "out_direct", split + ".jsonl"))
        b = read_jsonl(os.path.join(WORK, "out_converted", split + ".jsonl"))
        check(a == b, f"direct {split}: the same rows as the conversion")
    line = json.loads(r.stdout.strip().splitlines()[-1])
    check(line["train_examples"] == 5 and line["test_examples"] == 2 and line["source"] == hub,
          f"asyncrl data's line: {line}")
    # A glob picks one shard; a file names itself.
    r = asyncrl_data(os.path.join(hub, "data", "train-00001-*.parquet"),
                     os.path.join(hub, "data", "test-00000-of-00001.parquet"),
                     os.path.join(WORK, "out_glob"))
    got = [(o["question"], o["answer"]) for o in
           read_jsonl(os.path.join(WORK, "out_glob", "train.jsonl"))]
    check(r.returncode == 0 and got == TRAIN[3:], "a glob: the second shard's rows")
else:
    check(r.returncode == 2 and "built without Arrow" in r.stderr and
          "scripts/parquet_to_jsonl.py '" + hub + "' --split train" in r.stderr,
          f"without Arrow: exit 2 and the conversion command ({r.stderr.strip()})")

# 3. verl's nested columns: chat-message prompts, a dotted answer key into a struct.
verl = os.path.join(WORK, "verl")
write_verl(verl)
keys = ("prompt", "reward_model.ground_truth")
r = convert(os.path.join(verl, "train.parquet"), "train", os.path.join(WORK, "verl.jsonl"), keys)
check(r.returncode == 0, f"convert verl: {r.stderr.strip()}")
r = asyncrl_data(os.path.join(WORK, "verl.jsonl"), os.path.join(WORK, "verl.jsonl"),
                 os.path.join(WORK, "out_verl"), keys)
check(r.returncode == 0, f"asyncrl data on verl's layout: {r.stderr.strip()}")
verl_rows = read_jsonl(os.path.join(WORK, "out_verl", "train.jsonl"))
check([o["question"][1]["content"] for o in verl_rows] == [q for q, _ in TRAIN] and
      verl_rows[0]["question"][0] == {"role": "system", "content": "Réfléchis."},
      "verl: chat-message prompts kept as messages")
if built_in:
    r = asyncrl_data(os.path.join(verl, "train.parquet"), os.path.join(verl, "train.parquet"),
                     os.path.join(WORK, "out_verl_direct"), keys)
    check(r.returncode == 0 and
          read_jsonl(os.path.join(WORK, "out_verl_direct", "train.jsonl")) == verl_rows,
          f"verl direct: the same as converted ({r.stderr.strip()})")

# 4. Damaged files: each error names the file; exit 2 from both the script and asyncrl.
shard = os.path.join(hub, "data", "train-00000-of-00002.parquet")
with open(shard, "rb") as f:
    good = f.read()


def damaged(name, data):
    d = os.path.join(WORK, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    path = os.path.join(d, "train-00000-of-00001.parquet")
    with open(path, "wb") as f:
        f.write(data)
    return path


def expect_error(path, wanted, what, keys=("problem", "solution")):
    r = convert(path, "train", os.path.join(WORK, "bad.jsonl"), keys)
    check(r.returncode == 2 and all(w in r.stderr for w in wanted) and
          not os.path.exists(os.path.join(WORK, "bad.jsonl")),
          f"{what}, script: {r.stderr.strip()}")
    if built_in:
        r = asyncrl_data(path, os.path.join(WORK, "test.jsonl"), os.path.join(WORK, "out_bad"),
                         keys)
        check(r.returncode == 2 and all(w in r.stderr for w in wanted),
              f"{what}, asyncrl: {r.stderr.strip()}")


truncated = damaged("truncated", good[: len(good) // 2])
expect_error(truncated, [truncated + ": not a readable Parquet file"], "truncated")

# The footer's thrift sits before its 4-byte length and "PAR1": scramble its last 40 bytes.
bad = bytearray(good)
for i in range(len(good) - 8 - 40, len(good) - 8):
    bad[i] ^= 0xA5
flipped = damaged("footer", bytes(bad))
expect_error(flipped, [flipped + ": not a readable Parquet file"], "flipped footer")

# A data page of 'solution' in row group 1 (rows 2..2): its CRC no longer matches.
col = pq.ParquetFile(shard).metadata.row_group(1).column(2)
end = (col.dictionary_page_offset or col.data_page_offset) + col.total_compressed_size
bad = bytearray(good)
bad[end - 1] ^= 0xFF
page = damaged("page", bytes(bad))
expect_error(page, [page + ": rows 2..2 (row group 1), column 'solution'"], "flipped data page")

missing = damaged("missing", good)
expect_error(missing, [missing + ": no column 'question'", "its columns: id, problem, solution"],
             "missing key column", keys=("question", "solution"))

print(f"{len(failures)} failure(s)" if failures else "all passed")
sys.exit(1 if failures else 0)

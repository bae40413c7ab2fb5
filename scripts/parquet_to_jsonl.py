#!/usr/bin/env python3
"""Converts Parquet data (a file, a glob, or a Hugging Face hub dataset directory) to JSONL that
asyncrl reads (data.train_path / data.test_path), for builds without -DASYNCRL_PARQUET=ON.

  python3 scripts/parquet_to_jsonl.py DATASET_DIR --split train --out train.jsonl \
      [--prompt-key problem --answer-key solution]

Needs pyarrow (e.g. the reference venv: scripts/reference_venv.py). The files are chosen as
asyncrl chooses them (runtime/task/parquet_data.hpp): a glob's matches; a directory's
data/<split>-*.parquet, else <split>-*.parquet, else <split>/*.parquet; sorted by name, so that
shards come in order. Each row becomes one JSON object holding the columns the keys read (all
columns when no key is given), in order, unicode unescaped. Errors name the file (and the column
or key) and exit 2; without pyarrow it exits 3.
"""
import argparse
import fnmatch
import json
import os
import sys
import time


def fail(msg, code=2):
    print(f"parquet_to_jsonl: {msg}", file=sys.stderr)
    sys.exit(code)


def matching(directory, pattern):
    if not os.path.isdir(directory):
        return []
    return sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if fnmatch.fnmatchcase(name, pattern) and os.path.isfile(os.path.join(directory, name))
    )


def parquet_files(path, split):
    """The same choice as asyncrl's parquet_files()."""
    head, tail = os.path.split(path)
    if any(c in head for c in "*?[") and not os.path.exists(path):
        fail(f"{path}: a glob matches file names only, not directories")
    if any(c in tail for c in "*?["):
        files = matching(head or ".", tail)
        if not files:
            fail(f"{path}: no file matches")
        return files
    if os.path.isdir(path):
        for directory, pattern in ((os.path.join(path, "data"), f"{split}-*.parquet"),
                                   (path, f"{split}-*.parquet"),
                                   (os.path.join(path, split), "*.parquet")):
            files = matching(directory, pattern)
            if files:
                return files
        fail(f"{path}: no Parquet files for split '{split}' (looked for data/{split}-*.parquet, "
             f"{split}-*.parquet and {split}/*.parquet)")
    if not os.path.exists(path):
        fail(f"{path}: no such file or directory")
    return [path]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", help="a .parquet file, a glob of them, or a hub dataset directory")
    ap.add_argument("--split", default="train", help="the split of a directory (train, test, ...)")
    ap.add_argument("--out", "-o", required=True, help="the JSONL file to write")
    ap.add_argument("--prompt-key", help="data.prompt_key (a dotted path's first part is kept)")
    ap.add_argument("--answer-key", help="data.answer_key")
    args = ap.parse_args()
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        fail(f"{sys.executable} has no pyarrow: pip install pyarrow (or use the reference venv, "
             "scripts/reference_venv.py)", 3)

    keys = [(option, key) for option, key in (("--prompt-key", args.prompt_key),
                                              ("--answer-key", args.answer_key)) if key]
    start = time.monotonic()
    rows = 0
    files = parquet_files(args.path, args.split)
    tmp = args.out + ".tmp"  # a reader never sees half a file
    with open(tmp, "w", encoding="utf-8") as out:
        for f in files:
            try:
                # CRCs checked where the writer stored them, as asyncrl's reader does.
                pf = pq.ParquetFile(f, page_checksum_verification=True)
            except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ...
                os.remove(tmp)
                fail(f"{f}: not a readable Parquet file: {e}")
            names = pf.schema_arrow.names
            columns = []
            for option, key in keys:
                column = key.split(".")[0]
                if column not in names:
                    os.remove(tmp)
                    fail(f"{f}: no column '{column}' ({option} {key}); its columns: "
                         + ", ".join(names))
                if column not in columns:
                    columns.append(column)
            columns = columns or names
            # Row group by row group and column by column, so that a damaged page is named.
            groups, first = [], 0
            for g in range(pf.num_row_groups):
                n = pf.metadata.row_group(g).num_rows
                for c in columns:
                    try:
                        groups.append(pf.read_row_group(g, columns=[c]))
                    except Exception as e:
                        os.remove(tmp)
                        fail(f"{f}: rows {first}..{first + n - 1} (row group {g}), "
                             f"column '{c}': {e}")
                first += n
            # One table per (row group, column): join each row group's columns, then stack.
            k = len(columns)
            tables = [pa.table({c: groups[g * k + j].column(0) for j, c in enumerate(columns)})
                      for g in range(len(groups) // k)]
            records = pa.concat_tables(tables).to_pylist() if tables else []
            for i, record in enumerate(records):
                try:
                    out.write(json.dumps(record, ensure_ascii=False) + "\n")
                except (TypeError, ValueError) as e:  # bytes, timestamps: not JSON
                    os.remove(tmp)
                    fail(f"{f}: row {i}: {e}")
            rows += len(records)
    os.replace(tmp, args.out)
    print(json.dumps({"out": args.out, "files": len(files), "rows": rows,
                      "seconds": round(time.monotonic() - start, 3)}))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Checks the include layering of asyncrl's own sources (issue 28).

Scans apps/, actors/, messages/ and runtime/ (*.hpp, *.cpp, *.cu, *.cuh) for quoted includes,
which are written relative to the repo root ("runtime/config/sections.hpp", "actors/env.hpp").
Angle-bracket includes and quoted ones outside these four folders are not ours and are skipped.

Rules: a file may include its own unit or a strictly lower-ranked one.
  1. Between the top-level folders: apps > actors > messages > runtime (LAYERS).
  2. Inside runtime/: each subfolder has a rank (RUNTIME_RANKS). common/ is the bottom;
     config/ is the top, since it turns the YAML into each component's params: config/ may
     include everything below it, and nothing else in runtime/ may include config/.
  3. Inside actors/ (flat): each file stem belongs to a group with a rank (ACTOR_RANKS, keys are
     fnmatch patterns over the stem, so "controller*" is one group and x.cpp may include x.hpp).
An include of a higher rank is "upward"; of another unit with the same rank, "sideways".
A file whose subfolder or stem is in no table is an error: place new files deliberately.
Include cycles between files are reported too. Known exceptions go in ALLOWED.

Usage: scripts/check_layers.py [--list-ranks]    exit 0: clean, 1: violations, 2: usage.
"""
import fnmatch
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXTS = (".hpp", ".cpp", ".cu", ".cuh")

# Top-level folders, lowest first.
LAYERS = {"runtime": 0, "messages": 1, "actors": 2, "apps": 3}

# runtime/<subfolder>: rank. Derived from the include graph (longest path from common/),
# except config/, which is put on top by design.
RUNTIME_RANKS = {
    "common": 0,      # files, threads, rng, progress: no domain knowledge
    "text": 1,        # tokenizers, chat templates
    "cluster": 1,     # addresses, weight chunks
    "console": 1,     # console command parsing, live keys
    "checkpoint": 1,  # checkpoint file format
    "scheduling": 1,  # schedule, admission, simulator
    "report": 1,      # run reports for other tools: TensorBoard event files
    "tools": 2,       # environments of multi-turn episodes: calculator, external env client
    "dist": 2,        # c10d process groups (data-parallel collectives; uses cluster/ addresses)
    "model": 2,       # the transformer, its config and weights (uses text/)
    "generation": 3,  # sampling, CUDA graphs (uses model/)
    "train": 3,       # losses, advantages, optimizer, policy trainer (uses model/)
    "task": 4,        # datasets, prompting, rewards, evaluation (uses generation/, model/, text/)
    "serve": 5,       # the OpenAI-compatible API: requests, responses, batching (uses task/)
    "config": 9,      # YAML -> params of every component: always the top of runtime/
}

# actors/<stem>.{hpp,cpp}: rank, by fnmatch pattern over the stem.
ACTOR_RANKS = {
    # bottom: building blocks the roles share
    "errors": 0,
    "deferred_stop": 0,
    "weight_stage": 0,
    "run_ledger": 0,
    "run_checkpoint": 0,
    "role_params": 0,
    "metrics_log": 0,  # the controller's metrics.jsonl writer
    "node_registry": 0,  # the controller's record of worker nodes
    "env": 1,  # what every role shares (may hold role params)
    "env_pool": 1,  # a rollouter's environment pool (multi-turn episodes)
    "rollouter_roster": 1,  # the controller's roster (holds its node_registry)
    # middle: the roles
    "rollouter": 2,
    "reward": 2,
    "message_queue": 2,
    "trainer": 2,
    "synchronizer": 2,
    "console_tasks": 2,
    "node_agent": 3,  # hosts rollouters on a worker node
    # top: the controller and its parts
    "controller*": 4,
}

# Known exceptions: (including file, included path), each with the reason. Keep it empty.
ALLOWED = set([
    # ("runtime/x/a.hpp", "runtime/y/b.hpp"),  # reason, and the issue that removes it
])

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def unit_of(path):
    """(unit, rank) of a repo-relative path inside runtime/ or actors/, None elsewhere;
    raises KeyError(table name) when the file is in no table."""
    parts = path.split("/")
    if parts[0] == "runtime":
        if len(parts) < 3 or parts[1] not in RUNTIME_RANKS:
            raise KeyError("RUNTIME_RANKS")
        return "runtime/" + parts[1], RUNTIME_RANKS[parts[1]]
    if parts[0] == "actors":
        stem = os.path.splitext(parts[-1])[0]
        for pattern, rank in ACTOR_RANKS.items():
            if len(parts) == 2 and fnmatch.fnmatchcase(stem, pattern):
                return "actors/" + pattern, rank
        raise KeyError("ACTOR_RANKS")
    return None


def scan():
    """{file: [(line number, included path)]} over the four folders."""
    graph = {}
    for top in LAYERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(EXTS):
                    continue
                full = os.path.join(dirpath, name)
                rel = os.path.relpath(full, ROOT).replace(os.sep, "/")
                with open(full, encoding="utf-8", errors="replace") as f:
                    graph[rel] = [(n, m.group(1)) for n, line in enumerate(f, 1)
                                  if (m := INCLUDE.match(line))]
    return graph


def check_include(src, target):
    """The problem with src including target, or None."""
    if not os.path.isfile(os.path.join(ROOT, target)):
        return "no such file (includes are written from the repo root)"
    a, b = target.split("/")[0], src.split("/")[0]
    if LAYERS[a] > LAYERS[b]:
        return f"upward (layer {b} -> layer {a})"
    if a != b or a not in ("runtime", "actors"):
        return None
    (su, sr), (tu, tr) = unit_of(src), unit_of(target)
    if su == tu or tr < sr:
        return None
    kind = "upward" if tr > sr else "sideways"
    return f"{kind} ({su} rank {sr} -> {tu} rank {tr})"


def cycles(graph):
    """Strongly connected components of more than one file (or a file including itself)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for _, w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1 or any(t == v for _, t in graph[v]):
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def list_ranks():
    print("layers (top-level folders, lowest first):", ", ".join(LAYERS))
    for title, table in (("runtime/ subfolders", RUNTIME_RANKS), ("actors/ stems", ACTOR_RANKS)):
        print(f"\n{title}, highest first:")
        for rank in sorted(set(table.values()), reverse=True):
            print(f"  {rank}: " + ", ".join(k for k, r in table.items() if r == rank))
    print(f"\nALLOWED exceptions: {len(ALLOWED)}")
    for src, target in sorted(ALLOWED):
        print(f"  {src} -> {target}")


def main(argv):
    if "--list-ranks" in argv:
        list_ranks()
        return 0
    if len(argv) > 1:
        print(__doc__)
        return 2
    graph = scan()
    problems, unplaced, used = [], [], set()
    for src in sorted(graph):
        try:
            unit_of(src)
        except KeyError as e:
            unplaced.append(f"{src}: not in {e.args[0]}; add it to the table in "
                            f"scripts/check_layers.py")
            continue
        for line, target in graph[src]:
            if target.split("/")[0] not in LAYERS:
                continue
            try:
                why = check_include(src, target)
            except KeyError:
                continue  # the target is unplaced: reported as its own file
            if why and (src, target) in ALLOWED:
                used.add((src, target))
            elif why:
                problems.append(f'{src}:{line}: includes "{target}": {why}')
    for comp in cycles(graph):
        problems.append("include cycle among: " + ", ".join(comp))
    for line in unplaced + problems:
        print(line)
    for src, target in sorted(ALLOWED - used):
        print(f"note: ALLOWED entry ({src}, {target}) matches nothing; remove it")
    n_inc = sum(len(v) for v in graph.values())
    bad = len(unplaced) + len(problems)
    print(f"check_layers: {bad} violation(s) ({len(unplaced)} unplaced file(s)) in "
          f"{len(graph)} files, {n_inc} quoted includes, {len(used)} allowed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

#!/usr/bin/env python3
"""Checks a finished run's accounting: the identity hop by hop (rollouters -> reward -> queue ->
trainer) and the ledger (every schedule position trained or dropped exactly once, none lost).

usage: check_run.py RUN_DIR [--status completed] [--joined N] [--lost N] [--restarts N]
Used by the multi-process tests (tests/cluster, tests/repl). Exit 1 with the reason on failure.
"""
import argparse
import json
import sys

ap = argparse.ArgumentParser()
ap.add_argument("run")
ap.add_argument("--status", default="completed")
ap.add_argument("--joined", type=int, default=0, help="at least this many remote rollouters")
ap.add_argument("--lost", type=int, default=0, help="at least this many lost")
ap.add_argument("--restarts", type=int, default=0, help="at least this many rollouter restarts")
a = ap.parse_args()
s = json.load(open(a.run + "/summary.json"))


def need(ok, what):
    if not ok:
        print("FAIL:", what, json.dumps({k: s.get(k) for k in (
            "status", "error", "groups_generated", "groups_trained", "groups_dropped",
            "groups_in_flight", "remote_rollouters_joined", "remote_rollouters_lost",
            "rollouter_restarts")}))
        sys.exit(1)


need(s["status"] == a.status, "status")
need(s["groups_generated"] == s["groups_trained"] + s["groups_dropped"] + s["groups_in_flight"],
     "generated = trained + dropped + in flight")
need(s["reward"]["received"] == s["groups_generated"], "rollouters -> reward")
need(s["reward"]["forwarded"] == s["queue"]["received"], "reward -> queue")
need(s["queue"]["delivered"] == s["trainer"]["received"], "queue -> trainer")
need(s["groups_trained"] > 0, "something trained")
need(s["remote_rollouters_joined"] >= a.joined, "rollouters joined")
need(s["remote_rollouters_lost"] >= a.lost, "rollouters lost")
need(s["rollouter_restarts"] >= a.restarts, "rollouter restarts")
l = json.load(open(a.run + "/ledger.json"))
seqs = l["trained"] + l["dropped"]
need(len(seqs) == len(set(seqs)), "a schedule position trained or dropped twice")
need(sorted(seqs + l["in_flight"]) == list(range(l["next_seq"])), "a schedule position lost")
print("ok:", a.run, "generated", s["groups_generated"], "trained", s["groups_trained"],
      "joined", s["remote_rollouters_joined"], "lost", s["remote_rollouters_lost"],
      "restarts", s["rollouter_restarts"])

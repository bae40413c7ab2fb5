#!/usr/bin/env python3
"""`asyncrl serve` under load: requests/s and generated tokens/s at 1, 8 and 64 concurrent clients.

  bench/serve_bench.py --asyncrl build/asyncrl --model DIR [--clients 1 8 64] [--requests-per-client 4]
                       [--max-tokens 64] [--python PY]

Starts `asyncrl serve --model DIR` on a free loopback port, then for each client count C runs C
threads, each sending --requests-per-client chat requests back to back through the official
OpenAI client (temperature 1, a fixed seed per request, --max-tokens each, no stop string
other than the chat format's end of turn). Prints one JSON object: per C, the wall time,
requests/s, completion tokens/s (usage.completion_tokens summed), and the median and p90
latency per request. The server runs with --max-concurrent >= the largest C. Needs `openai`
(re-executes under the reference Python, tests/reference_python.py).
"""
import argparse
import concurrent.futures
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import reference_python  # noqa: E402

reference_python.need("openai")
import openai  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--asyncrl", default=os.path.join(ROOT, "build", "asyncrl"))
    ap.add_argument("--model", required=True)
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 8, 64])
    ap.add_argument("--requests-per-client", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--max-batch", type=int, default=64)
    args = ap.parse_args()

    p = subprocess.Popen([args.asyncrl, "serve", "--model", args.model, "--port", "0",
                          "--max-concurrent", str(max(args.clients)), "--max-batch",
                          str(args.max_batch), "--served-model-name", "m"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = []
        t = threading.Thread(target=lambda: line.append(p.stdout.readline()), daemon=True)
        t.start()
        t.join(600)
        if not line or "http://" not in line[0]:
            sys.exit(f"serve_bench: serve did not start: {line}")
        url = line[0].split()[2]
        client = openai.OpenAI(base_url=url, api_key="x", max_retries=0, timeout=1800)
        questions = [f"What is {a} + {b}?" for a in range(10) for b in range(10)]

        def one(i):
            t0 = time.perf_counter()
            r = client.chat.completions.create(
                model="m", messages=[{"role": "user", "content": questions[i % len(questions)]}],
                temperature=1.0, seed=i, max_tokens=args.max_tokens)
            return time.perf_counter() - t0, r.usage.completion_tokens

        one(0)  # warm-up: first-request costs (allocations) are not a client count's
        results = []
        for c in args.clients:
            n = c * args.requests_per_client
            t0 = time.perf_counter()
            with concurrent.futures.ThreadPoolExecutor(c) as pool:
                done = list(pool.map(one, range(n)))
            wall = time.perf_counter() - t0
            lat = sorted(d for d, _ in done)
            tokens = sum(k for _, k in done)
            results.append({"clients": c, "requests": n, "wall_s": round(wall, 3),
                            "requests_per_s": round(n / wall, 3),
                            "completion_tokens": tokens,
                            "tokens_per_s": round(tokens / wall, 1),
                            "latency_p50_s": round(statistics.median(lat), 3),
                            "latency_p90_s": round(lat[int(0.9 * (len(lat) - 1))], 3)})
            print(f"serve_bench: {results[-1]}", file=sys.stderr, flush=True)
        print(json.dumps({"bench": "serve", "model": args.model, "max_tokens": args.max_tokens,
                          "max_batch": args.max_batch, "machine": platform.node(),
                          "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
                          "results": results}, indent=1))
    finally:
        p.send_signal(signal.SIGINT)
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()


if __name__ == "__main__":
    main()

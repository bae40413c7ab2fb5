#!/usr/bin/env python3
"""`asyncrl serve` driven by the official OpenAI Python client (PyPI `openai`): ctest `serve_openai`.

  openai_client_test.py ASYNCRL WORK_DIR

1. `asyncrl sft` makes a tiny Qwen2-architecture model with a real tokenizer and Qwen's chat
   template (configs/gsm8k_tiny_hf.yaml), and `asyncrl serve` serves it on a free loopback port.
2. Through the client: /v1/models; chat greedy equal to `asyncrl generate` (text and summed
   log-probability); streaming equal to the whole response; n > 1 with a seed reproducible;
   logprobs; /v1/completions equal to `asyncrl generate --raw`; a stop string; concurrent requests
   each equal to their result alone; errors (400 naming the parameter, 404 model, 401 key, 413
   body) as the client's own exception classes.
3. `asyncrl serve --follow RUN_DIR` on a short RL run: serves the newest checkpoint's weights,
   switches when a newer checkpoint appears, and then answers as the run's final model does.

Runs under the reference Python (tests/reference_python.py: it has `openai`); exit 77 (skipped)
without one. Every process started is
stopped; every wait is bounded (a hang fails, a slow machine does not).
"""
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import reference_python  # noqa: E402

reference_python.need("openai")
import openai  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
CFG = os.path.join(ROOT, "configs", "gsm8k_tiny_hf.yaml")
KEY = "test-key-123"
procs = []


def fail(msg):
    print(f"serve_openai: FAIL: {msg}", file=sys.stderr)
    raise SystemExit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def run(args, timeout=1500):
    """A command that must succeed; its stdout. The timeout guards against a hang only."""
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        fail(f"{' '.join(args[:3])} exited {p.returncode}: {p.stderr[-2000:]}")
    return p.stdout


def generate(model, prompt, max_new, raw=False):
    args = [BIN, "generate", "--model", model, "--prompt", prompt, "--temperature", "0",
            "--max-new-tokens", str(max_new)]
    if raw:
        args.append("--raw")
    return json.loads(run(args).strip().splitlines()[-1])


class Server:
    """`asyncrl serve ...` on a free port; the URL from its first stdout line."""

    def __init__(self, *args):
        self.log = open(os.path.join(WORK, f"serve-{len(procs)}.log"), "w")
        self.p = subprocess.Popen([BIN, "serve", "--port", "0", *args], cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=self.log, text=True)
        procs.append(self.p)
        line = []
        t = threading.Thread(target=lambda: line.append(self.p.stdout.readline()), daemon=True)
        t.start()
        t.join(600)  # loading a model: minutes at worst on a loaded machine
        check(line and line[0].startswith("asyncrl serve: http://"),
              f"serve did not start: {line} (see {self.log.name})")
        self.url = line[0].split()[2]
        self.first_line = line[0]

    def client(self, key=KEY, **kw):
        return openai.OpenAI(base_url=self.url, api_key=key, max_retries=0, timeout=600, **kw)

    def stop(self):
        self.p.send_signal(signal.SIGINT)
        try:
            out, _ = self.p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            self.p.kill()
            fail("serve did not stop on SIGINT within 120 s")
        check(self.p.returncode == 0, f"serve exited {self.p.returncode}")
        check("stopped after" in out, f"serve's last line: {out!r}")


def expect_error(cls, status, fn, param=None):
    try:
        fn()
    except cls as e:
        check(e.status_code == status, f"{cls.__name__}: status {e.status_code}, expected {status}")
        if param is not None:
            body = e.body if isinstance(e.body, dict) else {}
            got = body.get("param", (body.get("error") or {}).get("param"))
            check(got == param, f"error param {got!r}, expected {param!r}: {e.body}")
        return e
    fail(f"expected {cls.__name__} ({status})")


def chat(c, q, **kw):
    return c.chat.completions.create(model="final", messages=[{"role": "user", "content": q}],
                                     **kw)


def serve_a_model(model):
    s = Server("--model", model, "--api-key", KEY, "--max-body-bytes", "20000", "--max-n", "4",
               "--max-tokens", "64")
    c = s.client()
    try:
        models = c.models.list().data
        check([m.id for m in models] == ["final"], f"models: {models}")
        check(models[0].model_extra.get("version") == 0, f"version: {models[0]}")

        # Greedy chat equals `asyncrl generate` (same chat template, same stop token).
        questions = ["What is 3 + 4?", "Tom has 5 apples and eats 2. How many are left?",
                     "Say something.", "12 * 3 = ?"]
        ref = {q: generate(model, q, 40) for q in questions}
        whole = {}
        for q in questions:
            r = chat(c, q, temperature=0, max_tokens=40, logprobs=True)
            ch = r.choices[0]
            check(ch.message.content == ref[q]["text"],
                  f"chat {q!r}: {ch.message.content!r} != generate {ref[q]['text']!r}")
            check(r.usage.completion_tokens == ref[q]["tokens"],
                  f"completion_tokens {r.usage.completion_tokens} != {ref[q]['tokens']}")
            lps = [t.logprob for t in ch.logprobs.content]
            check(len(lps) == r.usage.completion_tokens, "one logprob per token")
            check(all(v <= 0 for v in lps), f"logprobs > 0: {lps}")
            check(abs(sum(lps) - ref[q]["logprob"]) < 1e-3,
                  f"summed logprob {sum(lps)} != generate's {ref[q]['logprob']}")
            check(ch.finish_reason == ("stop" if ref[q]["finish"] == "eos" else "length"),
                  f"finish {ch.finish_reason} vs generate {ref[q]['finish']}")
            check(r.system_fingerprint == "asyncrl-v0", r.system_fingerprint)
            whole[q] = ch.message.content

        # Streaming: the deltas add up to the whole response; the role comes first; usage last.
        q = questions[1]
        chunks = list(chat(c, q, temperature=0, max_tokens=40, stream=True,
                           stream_options={"include_usage": True}))
        check(chunks[0].choices[0].delta.role == "assistant", "first chunk carries the role")
        text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
        check(text == whole[q], f"streamed {text!r} != {whole[q]!r}")
        finishes = [ch.choices[0].finish_reason for ch in chunks if ch.choices]
        check(finishes[-1] in ("stop", "length") and all(f is None for f in finishes[:-1]),
              f"finish reasons {finishes}")
        check(chunks[-1].usage is not None and chunks[-1].usage.completion_tokens ==
              ref[q]["tokens"], f"usage chunk {chunks[-1].usage}")

        # n > 1 with a seed: reproducible, and the choices are not all one.
        a = chat(c, questions[2], temperature=1.0, max_tokens=30, n=3, seed=7)
        b = chat(c, questions[2], temperature=1.0, max_tokens=30, n=3, seed=7)
        check([x.index for x in a.choices] == [0, 1, 2], "choice indices")
        ta = [x.message.content for x in a.choices]
        check(ta == [x.message.content for x in b.choices], f"seed 7 twice differs: {ta}")
        check(len(set(ta)) > 1, f"three sampled choices all equal: {ta}")

        # /v1/completions equals `asyncrl generate --raw`; a stop string cuts before itself.
        prompt = "Question: 2 + 2 =\nAnswer:"
        raw = generate(model, prompt, 32, raw=True)
        r = c.completions.create(model="final", prompt=prompt, temperature=0, max_tokens=32,
                                 logprobs=0)
        check(r.choices[0].text == raw["text"], f"completion {r.choices[0].text!r} != {raw['text']!r}")
        lp = r.choices[0].logprobs
        check(len(lp.token_logprobs) == r.usage.completion_tokens, "completion logprobs")
        check(abs(sum(lp.token_logprobs) - raw["logprob"]) < 1e-3, "completion summed logprob")
        full = raw["text"]
        cut = full[len(full) // 3:len(full) // 3 + 2] if len(full) >= 6 else None
        if cut and cut.strip():
            r = c.completions.create(model="final", prompt=prompt, temperature=0, max_tokens=32,
                                     stop=[cut])
            check(r.choices[0].text == full[:full.index(cut)],
                  f"stop {cut!r}: {r.choices[0].text!r} != {full[:full.index(cut)]!r}")
            check(r.choices[0].finish_reason == "stop", r.choices[0].finish_reason)
            streamed = "".join(x.choices[0].text for x in c.completions.create(
                model="final", prompt=prompt, temperature=0, max_tokens=32, stop=[cut],
                stream=True) if x.choices)
            check(streamed == full[:full.index(cut)], f"streamed with stop: {streamed!r}")

        # Concurrent requests: each equals its answer alone (one continuous batch).
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            got = list(pool.map(lambda q: chat(c, q, temperature=0, max_tokens=40)
                                .choices[0].message.content, questions * 2))
        check(got == [whole[q] for q in questions * 2], f"concurrent answers differ: {got}")

        # Errors, as the client's own exception classes, naming the parameter.
        expect_error(openai.BadRequestError, 400,
                     lambda: chat(c, "x", temperature=5), param="temperature")
        expect_error(openai.BadRequestError, 400,
                     lambda: chat(c, "x", extra_body={"frobnicate": 1}), param="frobnicate")
        expect_error(openai.BadRequestError, 400, lambda: chat(c, "x", n=5), param="n")
        expect_error(openai.BadRequestError, 400,
                     lambda: chat(c, "x", max_tokens=10_000), param="max_tokens")
        expect_error(openai.NotFoundError, 404, lambda: c.chat.completions.create(
            model="gpt-4", messages=[{"role": "user", "content": "x"}]), param="model")
        expect_error(openai.AuthenticationError, 401,
                     lambda: s.client(key="wrong").models.list())
        expect_error(openai.APIStatusError, 413, lambda: chat(c, "x" * 30000))
        check(c.models.list().data[0].id == "final", "the server still answers after errors")
    finally:
        s.stop()
    return whole


def follow_a_run(model):
    # Three RL steps with a checkpoint after each of the first two (a run's end writes final/,
    # not a checkpoint), then a directory that the test fills one checkpoint at a time. The
    # reward is a prefix bandit: "a" starts 121 of the 2070 tokens' texts, so about 6% of the
    # near-uniform tiny model's responses earn it and every step updates the weights.
    rl = os.path.join(WORK, "rl")
    run([BIN, "train", "--config", CFG, "model.tokenizer=", f"model.path={model}",
         "trainer.total_steps=3", "checkpoint.every_steps=1", "checkpoint.keep=5",
         f"runtime.run_dir={rl}", "reward.function=prefix", "reward.prefix=a",
         "eval.every_steps=0"])
    ckpts = sorted(os.listdir(os.path.join(rl, "checkpoints")))
    check(len(ckpts) >= 2, f"checkpoints: {ckpts}")
    follow = os.path.join(WORK, "follow")
    os.makedirs(os.path.join(follow, "checkpoints"))
    shutil.copy(os.path.join(rl, "config.yaml"), follow)
    shutil.copy(os.path.join(rl, "checkpoints", ckpts[0]), os.path.join(follow, "checkpoints"))
    q = "What is 3 + 4?"
    s = Server("--follow", follow, "--follow-every-s", "0.2", "--served-model-name", "final")
    try:
        c = s.client(key="unused")  # loopback and no --api-key: no key checked
        v0 = c.models.list().data[0].model_extra["version"]
        check(v0 >= 1, f"followed version {v0}")
        before = chat(c, q, temperature=0, max_tokens=40, logprobs=True)
        # Whole or not at all, as asyncrl writes checkpoints: a half-copied file is one the
        # server looks at once, finds broken and skips (a loaded machine made that race real).
        staged = os.path.join(WORK, "staged-" + ckpts[-1])
        shutil.copy(os.path.join(rl, "checkpoints", ckpts[-1]), staged)
        os.replace(staged, os.path.join(follow, "checkpoints", ckpts[-1]))
        deadline = time.time() + 300
        while c.models.list().data[0].model_extra["version"] == v0:
            check(time.time() < deadline, "serve --follow did not switch to the newer checkpoint")
            time.sleep(0.2)
        v1 = c.models.list().data[0].model_extra["version"]
        check(v1 > v0, f"version {v0} -> {v1}")
        hot = chat(c, q, temperature=0, max_tokens=40, logprobs=True)
        check(hot.system_fingerprint == f"asyncrl-v{v1}", hot.system_fingerprint)
        # The newer weights answer differently (log-probs at least): the switch did something.
        check([t.logprob for t in hot.choices[0].logprobs.content] !=
              [t.logprob for t in before.choices[0].logprobs.content],
              "the newer checkpoint answers exactly as the older: did the run update weights?")
    finally:
        s.stop()
    # A server started on the newest checkpoint answers exactly as the one that switched to it
    # (the switch copied every weight), and the run's own directory serves the same.
    s = Server("--follow", rl, "--served-model-name", "final")
    try:
        c = s.client(key="unused")
        check(c.models.list().data[0].model_extra["version"] == v1, "cold version")
        cold = chat(c, q, temperature=0, max_tokens=40, logprobs=True)
        check(cold.choices[0].message.content == hot.choices[0].message.content,
              f"cold {cold.choices[0].message.content!r} != hot {hot.choices[0].message.content!r}")
        lc = [t.logprob for t in cold.choices[0].logprobs.content]
        lh = [t.logprob for t in hot.choices[0].logprobs.content]
        check(lc == lh, f"cold and switched logprobs differ: {lc} vs {lh}")
    finally:
        s.stop()


def main():
    shutil.rmtree(WORK, ignore_errors=True)  # a rerun starts clean
    os.makedirs(WORK)
    run([BIN, "sft", "--config", CFG, f"runtime.run_dir={WORK}/sft", "sft.steps=3",
         "sft.log_every=1"])
    model = os.path.join(WORK, "sft", "final")
    serve_a_model(model)
    follow_a_run(model)
    print("serve_openai: ok")


if __name__ == "__main__":
    try:
        main()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()

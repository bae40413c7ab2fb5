#!/usr/bin/env python3
"""runtime.tensorboard read by TensorBoard's own reader (ctest label `ecosystem`).

usage: tensorboard_test.py ASYNCRL WORK_DIR

1. `asyncrl train --tensorboard` on a tiny model for 4 steps (checkpoints every 2). TensorBoard's
   EventAccumulator must find: a scalar for every number of every metrics.jsonl line, same step
   and value (as float32), and no other; the config as text (plugin "text") equal to the run's
   config.yaml; per step histograms of the rewards (num = the step's samples, mean = its
   reward_mean, min/max agreeing with its accuracy) and of the response lengths (within
   rollout.max_new_tokens, summing to the step's tokens_trained).
2. Every record passes TensorBoard's record reader (both CRCs) and re-serializes to the same
   bytes with protobuf (the hand-written encoding is canonical). A flipped byte in the data, and
   one in a length, make that reader fail its CRC check and the loader stop at that record: the
   CRCs are checked, not ignored.
3. A resume from a checkpoint before step 4 (the later ones removed) to step 5 starts a second
   file; the reader shows each of steps 1..5 once, with metrics.jsonl's values (the resumed
   run's after the checkpoint), not the first run's later steps as well.
Scalars and histograms are checked with the TensorBoard server's reader too
(plugin_event_accumulator), whose handling of restarts differs from EventAccumulator's.

Runs under the reference Python when this one has no tensorboard (tests/reference_python.py);
exit 77 (skipped) when neither has it.
"""
import json
import math
import os
import shutil
import struct
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests"))
import reference_python  # noqa: E402

reference_python.need("tensorboard")

from tensorboard.backend.event_processing import event_accumulator  # noqa: E402
from tensorboard.backend.event_processing import plugin_event_accumulator  # noqa: E402
from tensorboard.compat.proto import event_pb2  # noqa: E402
from tensorboard.compat.tensorflow_stub import errors  # noqa: E402
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New  # noqa: E402
from tensorboard.util import tensor_util  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
WORK = os.path.abspath(sys.argv[2])
RUN = os.path.join(WORK, "run")
TB = os.path.join(RUN, "tensorboard")
MAX_NEW_TOKENS = 12  # configs/chaos/base.yaml


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def train(args, log):
    with open(os.path.join(WORK, log), "w") as out:
        p = subprocess.run([BIN, "train"] + args, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                           timeout=900)
    if p.returncode != 0:
        print(open(os.path.join(WORK, log)).read()[-4000:])
        fail("asyncrl train %s exited %d" % (" ".join(args), p.returncode))


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def flatten(obj, prefix=""):
    """metrics.jsonl's numbers as runtime.tensorboard names them (booleans as 0/1)."""
    out = {}
    for k, v in obj.items():
        tag = prefix + "/" + k if prefix else k
        if isinstance(v, dict):
            out.update(flatten(v, tag))
        elif isinstance(v, bool):
            out[tag] = 1.0 if v else 0.0
        elif isinstance(v, (int, float)) and not (not prefix and k == "step"):
            out[tag] = float(v)
    return out


def metrics():
    with open(os.path.join(RUN, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def events_files(d):
    return sorted(os.path.join(d, n) for n in os.listdir(d) if "tfevents" in n)


def accumulator(d):
    acc = event_accumulator.EventAccumulator(
        d, size_guidance={k: 0 for k in (event_accumulator.SCALARS, event_accumulator.TENSORS,
                                         event_accumulator.HISTOGRAMS, event_accumulator.IMAGES,
                                         event_accumulator.AUDIO, event_accumulator.COMPRESSED_HISTOGRAMS)})
    acc.Reload()
    return acc


def raw_records(path):
    """Every record through TensorBoard's record reader, which checks both CRCs."""
    reader = PyRecordReader_New(path)
    out = []
    while True:
        try:
            reader.GetNext()
        except errors.OutOfRangeError:
            return out
        out.append(reader.record())


def check_scalars(acc, lines):
    want = {}  # tag -> {step: value}
    for line in lines:
        for tag, v in flatten(line).items():
            want.setdefault(tag, {})[line["step"]] = v
    have = set(acc.Tags()["scalars"])
    if have != set(want):
        fail("scalar tags: missing %s, extra %s" % (sorted(set(want) - have),
                                                    sorted(have - set(want))))
    for tag, by_step in want.items():
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if steps != sorted(by_step):
            fail("%s: steps %s, metrics.jsonl has %s" % (tag, steps, sorted(by_step)))
        for e in events:
            v = by_step[e.step]
            if not (e.value == f32(v) or math.isclose(e.value, v, rel_tol=1e-6)):
                fail("%s at step %d: %r, metrics.jsonl has %r" % (tag, e.step, e.value, v))
    return len(want)


def check_histograms(acc, lines):
    for tag in ("reward", "response_length"):
        events = {e.step: e.histogram_value for e in acc.Histograms(tag)}
        for line in lines:
            h = events.get(line["step"])
            if line["samples"] == 0:
                continue
            if h is None:
                fail("%s: no histogram at step %d" % (tag, line["step"]))
            if h.num != line["samples"] or sum(h.bucket) != h.num:
                fail("%s step %d: num %s, buckets %s, samples %d" % (
                    tag, line["step"], h.num, sum(h.bucket), line["samples"]))
            if not h.min <= h.sum / h.num <= h.max:
                fail("%s step %d: mean outside [min, max]" % (tag, line["step"]))
            if tag == "reward":
                # The prefix reward is 0 or 1: accuracy (the share with reward 1) fixes min and
                # max, and the histogram's mean is the line's reward_mean.
                if not math.isclose(h.sum / h.num, line["reward_mean"], abs_tol=1e-9):
                    fail("reward step %d: mean %s, reward_mean %s" % (
                        line["step"], h.sum / h.num, line["reward_mean"]))
                if (h.max, h.min) != (1.0 if line["accuracy"] > 0 else 0.0,
                                      0.0 if line["accuracy"] < 1 else 1.0):
                    fail("reward step %d: min %s max %s, accuracy %s" % (
                        line["step"], h.min, h.max, line["accuracy"]))
            else:
                if not (0 <= h.min and h.max <= MAX_NEW_TOKENS and h.max == int(h.max)):
                    fail("response_length step %d: min %s max %s" % (line["step"], h.min, h.max))
                # Every response token is in the loss here (no environment tokens), so the
                # lengths add up to the step's tokens_trained.
                if line["masked_tokens"] == 0 and h.sum != line["tokens_trained"]:
                    fail("response_length step %d: sum %s, tokens_trained %s" % (
                        line["step"], h.sum, line["tokens_trained"]))


def check_server_view(d, lines):
    """What `tensorboard --logdir` shows: its own reader (plugin_event_accumulator, which migrates
    scalars and histograms to tensors and treats SessionLog START differently from the legacy
    EventAccumulator): the same tags, each step once, the same values."""
    acc = plugin_event_accumulator.EventAccumulator(
        d, size_guidance={plugin_event_accumulator.TENSORS: 0})
    acc.Reload()
    want = {}
    for line in lines:
        for tag, v in flatten(line).items():
            want.setdefault(tag, {})[line["step"]] = v
    if set(acc.PluginTagToContent("scalars")) != set(want):
        fail("server view: scalar tags differ")
    for tag, by_step in want.items():
        events = acc.Tensors(tag)
        if [e.step for e in events] != sorted(by_step):
            fail("server view: %s steps %s, metrics.jsonl has %s" % (
                tag, [e.step for e in events], sorted(by_step)))
        for e in events:
            got = tensor_util.make_ndarray(e.tensor_proto).item()
            if got != f32(by_step[e.step]):
                fail("server view: %s step %d: %r, want %r" % (tag, e.step, got, by_step[e.step]))
    if set(acc.PluginTagToContent("histograms")) != {"reward", "response_length"}:
        fail("server view: histogram tags %s" % list(acc.PluginTagToContent("histograms")))
    samples = {l["step"]: l["samples"] for l in lines if l["samples"] > 0}
    for tag in ("reward", "response_length"):
        events = acc.Tensors(tag)
        if [e.step for e in events] != sorted(samples):
            fail("server view: %s steps %s" % (tag, [e.step for e in events]))
        for e in events:
            buckets = tensor_util.make_ndarray(e.tensor_proto)  # (k, 3): left, right, count
            if buckets[:, 2].sum() != samples[e.step]:
                fail("server view: %s step %d counts %s" % (tag, e.step, buckets[:, 2].sum()))
    if "config" not in acc.PluginTagToContent("text"):
        fail("server view: no config text")


def check_text(acc, config_yaml, step):
    texts = {e.step: e.tensor_proto.string_val[0].decode() for e in acc.Tensors("config")}
    want = "```yaml\n" + config_yaml + ("" if config_yaml.endswith("\n") else "\n") + "```"
    if texts.get(step) != want:
        fail("config text at step %d: %r..., want %r..." % (step, (texts.get(step) or "")[:80],
                                                            want[:80]))
    if acc.SummaryMetadata("config").plugin_data.plugin_name != "text":
        fail("config: plugin_name %r" % acc.SummaryMetadata("config").plugin_data.plugin_name)


def check_records(path):
    recs = raw_records(path)
    first = event_pb2.Event.FromString(recs[0])
    if first.file_version != "brain.Event:2":
        fail("%s: first event %s" % (path, first))
    for r in recs:
        if event_pb2.Event.FromString(r).SerializeToString() != r:
            fail("%s: a record protobuf re-serializes differently: %s" % (path, r.hex()))
    return len(recs)


def check_corruption_is_caught(path):
    """A flipped byte must fail TensorBoard's CRC check (the data's, then the length's)."""
    data = open(path, "rb").read()
    lengths, at = [], 0
    while at < len(data):
        n = struct.unpack_from("<Q", data, at)[0]
        lengths.append((at, n))
        at += 12 + n + 4
    bad_dir = os.path.join(WORK, "corrupt")
    for what, offset, message in (
            ("data", lengths[2][0] + 12 + lengths[2][1] // 2, "event crc32"),
            ("length", lengths[2][0], "header crc32")):
        shutil.rmtree(bad_dir, ignore_errors=True)
        os.makedirs(bad_dir)
        bad = os.path.join(bad_dir, os.path.basename(path))
        flipped = bytearray(data)
        flipped[offset] ^= 0x20
        open(bad, "wb").write(bytes(flipped))
        try:
            raw_records(bad)
            fail("a flipped %s byte passed TensorBoard's record reader" % what)
        except errors.DataLossError as e:
            if message not in str(e):
                fail("flipped %s byte: %s" % (what, e))
        # The loader stops at the bad record: only what came before it (the version event and
        # the config text) is seen, no scalars.
        if accumulator(bad_dir).Tags()["scalars"]:
            fail("flipped %s byte: the loader read on past the bad record" % what)


def main():
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    cfg = os.path.join(ROOT, "configs/chaos/base.yaml")
    common = ["rollout.num_workers=1", "checkpoint.every_steps=2", "checkpoint.keep=3",
              "runtime.progress_timeout_s=300"]
    train(["--config", cfg, "--tensorboard", "runtime.run_dir=" + RUN, "trainer.total_steps=4"]
          + common, "train1.log")
    first_config = open(os.path.join(RUN, "config.yaml")).read()
    if "tensorboard: true" not in first_config:
        fail("--tensorboard is not in config.yaml")
    lines = metrics()
    if [l["step"] for l in lines] != [1, 2, 3, 4]:
        fail("metrics.jsonl steps %s" % [l["step"] for l in lines])
    files = events_files(TB)
    if len(files) != 1:
        fail("events files %s" % files)
    acc = accumulator(TB)
    tags = check_scalars(acc, lines)
    check_histograms(acc, lines)
    check_text(acc, first_config, 0)
    check_server_view(TB, lines)
    records = check_records(files[0])
    check_corruption_is_caught(files[0])
    print("run 1: %d scalar tags x 4 steps, 2 histograms x 4, config text; %d records, CRCs "
          "checked" % (tags, records))

    # The resume: from a checkpoint before step 4 (the later ones removed), so the first file's
    # steps after it are trained again.
    ckpt = os.path.join(RUN, "checkpoints")
    steps = sorted(int(n[5:13]) for n in os.listdir(ckpt) if n.endswith(".ckpt"))
    if not steps or steps[0] >= 4:
        fail("no checkpoint before step 4: %s" % sorted(os.listdir(ckpt)))
    for s in steps:
        if s >= 4:
            os.remove(os.path.join(ckpt, "step-%08d.ckpt" % s))
    resumed_from = max(s for s in steps if s < 4)
    train(["--resume", RUN, "trainer.total_steps=5"], "train2.log")
    lines = metrics()
    if [l["step"] for l in lines] != [1, 2, 3, 4, 5]:
        fail("metrics.jsonl steps after the resume %s" % [l["step"] for l in lines])
    files = events_files(TB)
    if len(files) != 2:
        fail("events files after the resume %s" % files)
    acc = accumulator(TB)
    check_scalars(acc, lines)  # each step once, the values of the trimmed metrics.jsonl
    check_histograms(acc, lines)
    check_text(acc, open(os.path.join(RUN, "config.yaml")).read(), resumed_from + 1)
    check_server_view(TB, lines)
    check_records(files[1])
    print("resume from step %d: 2 files, steps 1..5 once each, the resumed run's values after "
          "it" % resumed_from)
    print("PASS")


main()

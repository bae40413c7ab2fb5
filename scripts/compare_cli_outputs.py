#!/usr/bin/env python3
"""Compares two output directories of scripts/cli_outputs.sh (the same commands run by two
binaries, e.g. before and after a refactor). Every file must be equal after masking what a run
cannot repeat: wall-clock times and rates, timestamps, the cluster port, the output directory's
own path, and the trainer's `deliveries` (how many pulls found groups waiting depends on thread
timing in the periodic mode; the groups, their order and every weight do not). Binary files
(models) must be byte-identical. Prints each difference; exit 1 if there is one.

    scripts/compare_cli_outputs.py BEFORE_DIR AFTER_DIR
"""
import json
import os
import re
import sys

# Keys whose values are times, rates or shares of time.
TIMEY = re.compile(r'(time|(^|_)ms($|_)|seconds|wall|(^|_)s$|per_s|tpspd|cpu|throughput|(^|_)rate|'
                   r'idle|elapsed|speed|GBps|tok_s|utilization|(^|_)share|^port$|^deliveries$)', re.I)


def mask_obj(o):
    if isinstance(o, dict):
        return {k: ('<masked>' if TIMEY.search(k) else mask_obj(v)) for k, v in o.items()}
    if isinstance(o, list):
        return [mask_obj(v) for v in o]
    return o


def mask_text(text, own_dir):
    text = text.replace(own_dir, 'OUT')
    out = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith(('{', '[')):
            try:
                out.append(json.dumps(mask_obj(json.loads(s)), sort_keys=True))
                continue
            except ValueError:
                pass
        line = re.sub(r'^\[\d{4}-\d\d-\d\d [\d:.]+\] ', '', line)  # spdlog's timestamp
        line = re.sub(r'^\d\d:\d\d:\d\d\.\d+ ', '', line)  # the console sink's
        line = re.sub(r'Usage: \S*asyncrl', 'Usage: asyncrl', line)
        line = re.sub(r'\d+(\.\d+)?(e-?\d+)? ?(s|ms|us|%|/s|tok/s|tokens/s)\b', '<t>', line)
        line = re.sub(r'(in|took|after) [\d.]+', r'\1 <t>', line)
        line = re.sub(r'(tok/s|ETA) \S+', r'\1 <t>', line)
        line = re.sub(r'\| [^|]* elapsed', '| <t> elapsed', line)
        line = re.sub(r'127\.0\.0\.1:\d+', '127.0.0.1:<port>', line)
        out.append(line)
    return '\n'.join(out)


def read_masked(path, own_dir):
    raw = open(path, errors='replace').read()
    try:  # a whole-file JSON document (summary.json, ledger.json)
        raw = json.dumps(mask_obj(json.loads(raw)), sort_keys=True)
    except ValueError:
        pass
    return mask_text(raw, own_dir)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    a, b = (os.path.abspath(d) for d in sys.argv[1:])
    bad = files = 0
    for root, _, names in os.walk(a):
        for name in sorted(names):
            pa = os.path.join(root, name)
            rel = os.path.relpath(pa, a)
            pb = os.path.join(b, rel)
            files += 1
            if not os.path.exists(pb):
                print('MISSING in', b, rel)
                bad += 1
                continue
            if name == 'run.secret':  # random by design
                continue
            if rel.endswith(('.safetensors', '.bin', '.ckpt', '.png')):
                if open(pa, 'rb').read() != open(pb, 'rb').read():
                    print('BINARY DIFF', rel)
                    bad += 1
                continue
            ta, tb = read_masked(pa, a), read_masked(pb, b)
            if ta != tb:
                bad += 1
                print('DIFF', rel)
                for x, y in zip(ta.splitlines(), tb.splitlines()):
                    if x != y:
                        print('  <', x[:300])
                        print('  >', y[:300])
                        break
    print(f'compare_cli_outputs: {files} files, {bad} differ after masking')
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()

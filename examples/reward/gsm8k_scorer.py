#!/usr/bin/env python3
"""asyncrl external scorer (docs/reward-protocol.md): GSM8K/MATH rule, as runtime/task/reward.cpp.
Frames on stdin/stdout, or `--socket PATH` (a thread per connection). Needs python3-msgpack."""
import math, os, re, socket, struct, sys, threading
try:
    import msgpack
except ImportError:  # the first python3 on PATH is not the one with python3-msgpack
    sys.exit(f"gsm8k_scorer.py: {sys.executable} has no msgpack module: run it with "
             "/usr/bin/python3 (Debian's python3-msgpack) or `pip install msgpack` there")

NUM = re.compile(r'(?:([+-])\$?|\$([+-])?)?([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)?(\.[0-9]+)?%?\.?')
WS = ' \t\r\n\v\f'

def number(text):  # sign and/or $, digits with thousands commas, decimals, trailing % and/or '.'
    m = NUM.fullmatch(text.strip(WS))
    if not m or not (m[3] or m[4]): return None
    v = float((m[3] or '').replace(',', '') + (m[4] or ''))
    v = -v if '-' in (m[1], m[2]) else v
    return v if math.isfinite(v) else None

def final_answer(s):  # after the last '####' (to the end of its line), else the last \boxed{}
    if '####' in s: return s[s.rfind('####') + 4:].split('\n')[0].strip(WS)
    opened, best = [], None
    for i, c in enumerate(s):
        if c == '{': opened.append(i + 1)
        elif c == '}' and opened:
            b = opened.pop()
            if b >= 7 and s[b - 7:b] == '\\boxed{' and (best is None or b > best[0]): best = (b, i)
    return best and s[best[0]:best[1]].strip(WS)

def score(response, truth):  # 1.0 iff the final answer equals the truth numerically
    t, a = number(truth), final_answer(response)
    v = None if a is None else number(a)
    return 1.0 if None not in (t, v) and abs(v - t) <= 1e-6 * max(1.0, abs(t)) else 0.0

def serve(rf, wf):
    while len(head := rf.read(4)) == 4:
        req = msgpack.unpackb(rf.read(struct.unpack('>I', head)[0]), raw=False, unicode_errors='surrogateescape')
        out = msgpack.packb({'uid': req['uid'], 'score': score(req['response'], req['ground_truth']), 'info': {}})
        wf.write(struct.pack('>I', len(out)) + out); wf.flush()

if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--socket':
        if os.path.exists(sys.argv[2]): os.unlink(sys.argv[2])
        srv = socket.socket(socket.AF_UNIX); srv.bind(sys.argv[2]); srv.listen(64)
        print('listening on', sys.argv[2], flush=True)  # tests wait for this line
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve, args=(c.makefile('rb'), c.makefile('wb')), daemon=True).start()
    else:
        serve(sys.stdin.buffer, sys.stdout.buffer)

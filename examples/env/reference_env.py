#!/usr/bin/env python3
"""asyncrl external environment (docs/env-protocol.md), written from that page alone: a calculator
tool. A model turn containing <<EXPR>> is answered with the value of the first EXPR and a newline;
a turn without <<...>> is the final answer: done, reward 1.0 if it contains '#### <ground_truth>',
else 0.0. EXPR: integers, + - * / ( ), unary minus, exact division; evaluated by the small parser
below, never eval. Frames on stdin/stdout, or `--socket PATH` (a thread per connection).
Needs msgpack (Debian: python3-msgpack, for /usr/bin/python3)."""
import os, re, socket, struct, sys, threading
try:
    import msgpack
except ImportError:
    sys.exit(f"reference_env.py: {sys.executable} has no msgpack module: run it with "
             "/usr/bin/python3 (Debian's python3-msgpack) or `pip install msgpack` there")

CALL = re.compile(r'<<(.*?)>>', re.S)
MAX_EXPR, MAX_DEPTH, MAX_DIGITS = 256, 32, 18

class CalcError(Exception):
    pass

def calculate(text):
    """The exact integer value of `text`; CalcError says why not. Recursive descent, bounded in
    length, nesting and literal size, so any input is cheap."""
    if len(text) > MAX_EXPR: raise CalcError('expression too long')
    toks = re.findall(r'\d+|[-+*/()]|\S', text)
    pos = 0

    def peek():
        return toks[pos] if pos < len(toks) else None

    def take():
        nonlocal pos
        pos += 1
        return toks[pos - 1]

    def expr(depth):
        v = term(depth)
        while peek() in ('+', '-'):
            v = v + term(depth) if take() == '+' else v - term(depth)
        return v

    def term(depth):
        v = unary(depth)
        while peek() in ('*', '/'):
            op, w = take(), unary(depth)
            if op == '*': v *= w
            elif w == 0: raise CalcError('division by zero')
            elif v % w: raise CalcError('not an integer')
            else: v //= w
        return v

    def unary(depth):
        if peek() == '-':
            take()
            return -unary(depth)
        return atom(depth)

    def atom(depth):
        t = peek()
        if t is None: raise CalcError('unexpected end')
        if t == '(':
            if depth >= MAX_DEPTH: raise CalcError('too deeply nested')
            take()
            v = expr(depth + 1)
            if peek() != ')': raise CalcError("missing ')'")
            take()
            return v
        if t.isdigit():
            if len(t) > MAX_DIGITS: raise CalcError('number too long')
            take()
            return int(t)
        raise CalcError(f'unexpected {t!r}')

    v = expr(0)
    if pos != len(toks): raise CalcError(f'unexpected {toks[pos]!r}')
    return v

class Episode:
    def __init__(self, task, truth, seed):
        self.task, self.truth, self.seed = task, truth, seed

def answer(episodes, req):
    """The answer to one request, or None for close."""
    kind, ep = req['type'], req['episode']
    if kind == 'reset':
        episodes[ep] = Episode(req['task'], req['ground_truth'], req['seed'])
        return {'episode': ep, 'ok': True}
    if kind == 'close':
        episodes.pop(ep, None)
        return None
    if kind != 'step': raise ValueError(f'unknown request type {kind!r}')
    e = episodes.get(ep)
    if e is None: raise ValueError(f'step for episode {ep}, which was never reset')
    m = CALL.search(req['text'])
    if m is None:  # the final answer
        reward = 1.0 if f"#### {e.truth}" in req['text'] else 0.0
        return {'episode': ep, 'observation': '', 'done': True, 'reward': reward}
    try:
        obs = f'{calculate(m.group(1))}\n'
    except CalcError as err:
        obs = f'error: {err}\n'
    return {'episode': ep, 'observation': obs, 'done': False}

def serve(rf, wf):
    episodes = {}  # per connection: episode id -> its state
    while len(head := rf.read(4)) == 4:
        body = rf.read(struct.unpack('>I', head)[0])
        out = answer(episodes, msgpack.unpackb(body, raw=False))
        if out is not None:
            data = msgpack.packb(out)
            wf.write(struct.pack('>I', len(data)) + data)
            wf.flush()

def serve_conn(conn):
    try:
        serve(conn.makefile('rb'), conn.makefile('wb'))
    except Exception as err:  # one bad connection must not take the server down
        print(f'reference_env.py: connection dropped: {err!r}', file=sys.stderr)
    finally:
        conn.close()

if __name__ == '__main__':
    if len(sys.argv) == 3 and sys.argv[1] == '--socket':
        path = sys.argv[2]
        if os.path.exists(path): os.unlink(path)
        srv = socket.socket(socket.AF_UNIX)
        srv.bind(path)
        srv.listen(64)
        print('listening on', path, file=sys.stderr, flush=True)
        while True:
            c, _ = srv.accept()
            threading.Thread(target=serve_conn, args=(c,), daemon=True).start()
    elif len(sys.argv) == 1:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    else:
        sys.exit('usage: reference_env.py [--socket PATH]')

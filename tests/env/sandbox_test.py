#!/usr/bin/env python3
"""Escape tests of examples/env/sandbox_exec_env.py (ctest -L env; docs/env-protocol.md).

Drives the environment through the protocol (frames over its stdin/stdout, as asyncrl does) with
programs that try to get out: TCP to a listener on the host's loopback and to an outside
address, writes outside the sandbox, a fork bomb, 100 MB of output, an endless loop, 4 GiB of
memory, a file over the size limit. Each must be refused, and the environment must still answer
after it. A benign program's output is checked exactly, so a sandbox that runs nothing fails
too. Without bwrap, or where it cannot create namespaces, exits 77 (ctest: skipped); the
environment itself must then refuse to start, which is checked first.

Every wait is bounded (select with a deadline); the environment process is killed and reaped at
the end whatever happens."""
import os, random, select, socket, struct, subprocess, sys, time
import msgpack

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = os.path.join(ROOT, 'examples', 'env', 'sandbox_exec_env.py')
PY = '/usr/bin/python3'
CALL_S = 60  # bound of one call (a run is bounded by the environment's 5 s wall clock)
failures = []

def check(cond, what):
    print(('ok   ' if cond else 'FAIL ') + what, flush=True)
    if not cond: failures.append(what)

def bwrap_works():
    try:
        r = subprocess.run(['bwrap', '--unshare-all', '--ro-bind', '/usr', '/usr', '--symlink',
                            'usr/lib', '/lib', '--symlink', 'usr/lib64', '/lib64', '--symlink',
                            'usr/bin', '/bin', '/usr/bin/true'], capture_output=True, timeout=30)
        return r.returncode == 0, r.stderr.decode(errors='replace')
    except FileNotFoundError:
        return False, 'bwrap is not installed'

class Env:
    def __init__(self):
        self.p = subprocess.Popen([PY, ENV], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  start_new_session=True)

    def call(self, req):
        body = msgpack.packb(req)
        self.p.stdin.write(struct.pack('>I', len(body)) + body)
        self.p.stdin.flush()
        head = self.read(4)
        return msgpack.unpackb(self.read(struct.unpack('>I', head)[0]), raw=False)

    def read(self, n):
        out, deadline = b'', time.monotonic() + CALL_S
        while len(out) < n:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.p.stdout], [], [], left)[0]:
                raise TimeoutError(f'no answer within {CALL_S} s')
            chunk = os.read(self.p.stdout.fileno(), n - len(out))
            if not chunk: raise EOFError(f'the environment exited ({self.p.poll()})')
            out += chunk
        return out

    def run(self, turn, code):
        a = self.call({'type': 'step', 'episode': 1, 'turn': turn,
                       'text': f'Let me run:\n```python\n{code}\n```\n'})
        assert a['episode'] == 1 and a['done'] is False, a
        return a['observation']

    def close(self):
        try:
            self.p.stdin.close()
            self.p.wait(timeout=5)
        except Exception:
            pass
        finally:
            try: os.killpg(self.p.pid, 9)
            except ProcessLookupError: pass
            self.p.wait()

def pgrep(marker):
    r = subprocess.run(['pgrep', '-f', marker], capture_output=True, text=True)
    return r.stdout.split()

def main():
    # Without bwrap on PATH the environment must refuse to start, never run unsandboxed.
    r = subprocess.run([PY, ENV], env={'PATH': '/nonexistent'}, input=b'', capture_output=True,
                       timeout=60)
    check(r.returncode == 1 and b'not installed' in r.stderr,
          f'refuses to start without bwrap (status {r.returncode}: {r.stderr[-200:]!r})')
    works, why = bwrap_works()
    if not works:
        print(f'SKIP: bwrap cannot create a sandbox on this machine: {why.strip()}')
        return 1 if failures else 77

    tag = f'{os.getpid()}_{random.randrange(1 << 30)}'
    marker = f'asyncrl_forkbomb_{tag}'
    env = Env()
    listener = socket.socket()
    listener.bind(('127.0.0.1', 0))
    listener.listen(4)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        a = env.call({'type': 'reset', 'episode': 1, 'task': 'escape', 'ground_truth': '7',
                      'seed': 0})
        check(a == {'episode': 1, 'ok': True}, f'reset answered {a}')
        obs = env.run(1, 'print(sum(range(10)))\nprint("caf\\u00e9")')
        check(obs == '45\ncafé\n', f'a benign program runs: {obs!r}')

        net = ('import socket\n'
               'for host, port in [("127.0.0.1", %d), ("1.1.1.1", 53), ("8.8.8.8", 443)]:\n'
               '    try:\n'
               '        socket.create_connection((host, port), timeout=2)\n'
               '        print("CONNECTED", host)\n'
               '    except OSError as e:\n'
               '        print("refused", host, e.errno)\n' % port)
        obs = env.run(2, net)
        check('CONNECTED' not in obs and obs.count('refused') == 3, f'no network: {obs!r}')
        try:
            listener.accept()
            check(False, 'the host listener got no connection')
        except BlockingIOError:
            check(True, 'the host listener got no connection')

        targets = [f'/tmp/escape_{tag}', os.path.join(ROOT, f'escape_{tag}'),
                   f'/usr/escape_{tag}', f'/box/../escape_{tag}']
        write = ('for p in %r:\n'
                 '    try:\n'
                 '        open(p, "w").write("x")\n'
                 '        print("wrote", p)\n'
                 '    except OSError as e:\n'
                 '        print("refused", p, e.errno)\n' % (targets,))
        obs = env.run(3, write)
        check(f'refused {targets[1]}' in obs and f'refused {targets[2]}' in obs,
              f'writes outside the sandbox are refused: {obs!r}')
        for t in targets[:3]:
            check(not os.path.exists(t), f'{t} does not exist on the host')

        # A counting bomb: how many processes can it make? (the limit is 16 per sandbox)
        count = ('import os, time\n'
                 'n = 0\n'
                 'for i in range(200):\n'
                 '    try:\n'
                 '        if os.fork() == 0:\n'
                 '            time.sleep(1); os._exit(0)\n'
                 '        n += 1\n'
                 '    except OSError:\n'
                 '        break\n'
                 'print("forked", n)\n')
        obs = env.run(4, count)
        forked = int(obs.split()[1]) if obs.startswith('forked ') else -1
        check(0 < forked < 16, f'the process limit stops a fork loop: {obs!r}')
        # The real bomb, re-executed so that every process carries the marker in its argv.
        bomb = ('import os\n'
                'code = "import os\\nwhile True:\\n    try:\\n        os.fork()\\n'
                '    except OSError:\\n        pass\\n"\n'
                f'os.execv("/usr/bin/python3", ["python3", "-c", code, "{marker}"])\n')
        obs = env.run(5, bomb)
        check('timed out' in obs or 'killed' in obs, f'a fork bomb is stopped: {obs!r}')
        deadline = time.monotonic() + 10  # the kernel tears a PID namespace down asynchronously
        while pgrep(marker) and time.monotonic() < deadline:
            time.sleep(0.1)
        check(not pgrep(marker), f'no process of the fork bomb is left ({pgrep(marker)})')

        obs = env.run(6, 'import sys\nsys.stdout.write("y" * (100 << 20))')
        check(obs.startswith('y' * 4096) and '[output cut at 4096 bytes]' in obs and len(obs) < 4300,
              f'100 MB of output is cut: {len(obs)} bytes, ends {obs[-60:]!r}')
        obs = env.run(7, 'while True:\n    pass')
        check('SIGXCPU' in obs or 'SIGKILL' in obs or 'timed out' in obs,
              f'an endless loop is stopped: {obs!r}')
        obs = env.run(8, 'b = bytearray(4 << 30)\nprint("allocated", len(b))')
        check('MemoryError' in obs and 'allocated' not in obs, f'4 GiB is refused: {obs!r}')
        obs = env.run(9, 'open("/box/big", "wb").write(b"z" * (2 << 20))')
        check('File too large' in obs, f'a file over 1 MiB is refused: {obs!r}')

        obs = env.run(10, 'print(2 ** 10)')
        check(obs == '1024\n', f'the environment still runs code after all that: {obs!r}')
        a = env.call({'type': 'step', 'episode': 1, 'turn': 11, 'text': 'done: #### 7'})
        check(a.get('done') is True and a.get('reward') == 1.0, f'the final answer: {a}')
    except (TimeoutError, EOFError, AssertionError) as e:
        check(False, f'the environment stopped answering: {e!r}')
    finally:
        env.close()
        listener.close()
        # A broken sandbox can leave the bomb running: stop every process carrying our marker
        # (stopped first, so that none can fork while the others are killed).
        leftover = [int(p) for p in pgrep(marker)] if marker else []
        for sig in (19, 9):  # SIGSTOP, SIGKILL
            for pid in leftover:
                try: os.kill(pid, sig)
                except ProcessLookupError: pass
        for t in (f'/tmp/escape_{tag}', os.path.join(ROOT, f'escape_{tag}')):
            if os.path.exists(t): os.unlink(t)
    print(f'{len(failures)} failure(s)')
    return 1 if failures else 0

if __name__ == '__main__':
    sys.exit(main())

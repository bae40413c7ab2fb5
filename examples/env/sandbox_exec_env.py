#!/usr/bin/env python3
"""asyncrl external environment (docs/env-protocol.md) that runs the model's Python in a sandbox.

A model turn containing a fenced ```python block runs that block; the observation is what it
printed (stdout and stderr, cut at OUTPUT_CAP bytes) plus a note when it was cut, failed or was
stopped. A turn without a code block is the final answer: done, reward 1.0 if it contains
'#### <ground_truth>', else 0.0.

Every run is a fresh bubblewrap sandbox (`bwrap`, Debian package bubblewrap): all namespaces new
(no network), /usr read-only, a private size-limited tmpfs as /tmp and as the working directory
/box (nothing else is writable, nothing survives the run), setrlimit limits on CPU time, address
space, processes (fork bombs), file size and open files, and a wall-clock timeout that kills the
whole sandbox. Run as root, the code runs as `nobody` (uid 65534): the kernel exempts root from the
process limit. Without a working bwrap it refuses to start: it never runs code unsandboxed.
Frames on stdin/stdout; needs msgpack (Debian: python3-msgpack, for /usr/bin/python3)."""
import os, re, select, signal, struct, subprocess, sys, time
try:
    import msgpack
except ImportError:
    sys.exit(f"sandbox_exec_env.py: {sys.executable} has no msgpack module: run it with "
             "/usr/bin/python3 (Debian's python3-msgpack) or `pip install msgpack` there")

OUTPUT_CAP = 4096          # bytes of output kept for the observation
WALL_S = 5.0               # wall-clock bound of one run
LIMITS = {                 # prlimit options, applied inside the sandbox to everything it runs
    'cpu': '2:3',          # seconds of CPU time: SIGXCPU at 2, SIGKILL at 3
    'as': 512 << 20,       # bytes of address space
    'nproc': 16,           # processes of the sandbox's user (fork bombs stop here)
    'fsize': 1 << 20,      # bytes per written file
    'nofile': 64,          # open files
}
TMPFS_BYTES = 16 << 20     # size of /tmp and of /box
NOBODY = 65534
CODE = re.compile(r'```python[ \t]*\r?\n(.*?)```', re.S)

def log(msg):
    print(f'sandbox_exec_env.py: {msg}', file=sys.stderr, flush=True)

def bwrap_argv():
    argv = ['bwrap', '--unshare-all', '--die-with-parent', '--new-session', '--clearenv',
            '--setenv', 'PATH', '/usr/bin:/bin', '--setenv', 'HOME', '/box',
            '--setenv', 'PYTHONDONTWRITEBYTECODE', '1',
            '--ro-bind', '/usr', '/usr', '--symlink', 'usr/bin', '/bin',
            '--symlink', 'usr/lib', '/lib', '--proc', '/proc', '--dev', '/dev',
            '--size', str(TMPFS_BYTES), '--tmpfs', '/tmp',
            '--size', str(TMPFS_BYTES), '--tmpfs', '/box', '--chdir', '/box']
    if os.path.isdir('/usr/lib64'): argv += ['--symlink', 'usr/lib64', '/lib64']
    limits = [f'--{k}={v}' for k, v in LIMITS.items()]
    return argv + ['--', '/usr/bin/prlimit'] + limits + ['--', '/usr/bin/python3', '-I', '-']

def run_sandboxed(code):
    """Runs `code`; returns (output bytes kept, whether output was cut, how it ended)."""
    user = dict(user=NOBODY, group=NOBODY, extra_groups=[]) if os.geteuid() == 0 else {}
    p = subprocess.Popen(bwrap_argv(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, start_new_session=True, **user)
    try:
        p.stdin.write(code.encode('utf-8', 'surrogateescape'))
        p.stdin.close()
    except BrokenPipeError:
        pass
    kept, cut, timed_out = bytearray(), False, False
    deadline = time.monotonic() + WALL_S
    fd = p.stdout.fileno()
    while True:  # drain to EOF, keeping the first OUTPUT_CAP bytes: 100 MB costs no memory
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([fd], [], [], left)
        if not ready: continue
        chunk = os.read(fd, 65536)
        if not chunk: break
        room = OUTPUT_CAP - len(kept)
        if len(chunk) > room: cut = True
        kept += chunk[:max(room, 0)]
    if timed_out:
        # bwrap's child is the sandbox's PID 1, with --die-with-parent: killing bwrap ends it, and
        # with it every process in the sandbox.
        os.killpg(p.pid, signal.SIGKILL)
    status = p.wait()
    p.stdout.close()
    if timed_out: how = f'timed out after {WALL_S:g} s, killed'
    elif status < 0: how = f'killed by signal {signal.Signals(-status).name}'
    elif status > 128 and status - 128 in signal.valid_signals():  # bwrap: 128 + the signal
        how = f'killed by signal {signal.Signals(status - 128).name}'
    elif status != 0: how = f'exit status {status}'
    else: how = ''
    return bytes(kept), cut, how

def observation(code):
    out, cut, how = run_sandboxed(code)
    text = out.decode('utf-8', 'replace')
    for note in ([f'output cut at {OUTPUT_CAP} bytes'] if cut else []) + ([how] if how else []):
        text += ('' if text.endswith('\n') or not text else '\n') + f'[{note}]\n'
    return text

def check_sandbox():
    """Refuses to start (exit 1, a message on stderr) unless a sandboxed run works."""
    try:
        out, _, how = run_sandboxed('print(6 * 7)')
    except FileNotFoundError:
        log('bwrap (bubblewrap) is not installed: refusing to run code without a sandbox '
            '(Debian: apt-get install bubblewrap)')
        sys.exit(1)
    if out != b'42\n' or how:
        log('bwrap cannot create its sandbox here (user namespaces disabled?): refusing to run '
            f'code without one; it said: {out.decode("utf-8", "replace").strip()} {how}')
        sys.exit(1)

def answer(episodes, req):
    kind, ep = req['type'], req['episode']
    if kind == 'reset':
        episodes[ep] = req['ground_truth']
        return {'episode': ep, 'ok': True}
    if kind == 'close':
        episodes.pop(ep, None)
        return None
    if kind != 'step': raise ValueError(f'unknown request type {kind!r}')
    if ep not in episodes: raise ValueError(f'step for episode {ep}, which was never reset')
    m = CODE.search(req['text'])
    if m is None:
        reward = 1.0 if f'#### {episodes[ep]}' in req['text'] else 0.0
        return {'episode': ep, 'observation': '', 'done': True, 'reward': reward}
    return {'episode': ep, 'observation': observation(m.group(1)), 'done': False}

def serve(rf, wf):
    episodes = {}  # episode id -> ground truth
    while len(head := rf.read(4)) == 4:
        req = msgpack.unpackb(rf.read(struct.unpack('>I', head)[0]), raw=False)
        out = answer(episodes, req)
        if out is not None:
            data = msgpack.packb(out)
            wf.write(struct.pack('>I', len(data)) + data)
            wf.flush()

if __name__ == '__main__':
    check_sandbox()
    serve(sys.stdin.buffer, sys.stdout.buffer)

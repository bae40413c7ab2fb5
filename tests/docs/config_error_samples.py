#!/usr/bin/env python3
"""The config errors quoted in README.md and docs/*.md are the program's own (ctest
docs_config_error_samples). A quoted `config error: configs/X.yaml:N: key 'K': ... got 'V'` is
reproduced by writing V into line N of a copy of the configs and running `asyncrl config`: the
program must print the quoted line word for word, which fails when the file's lines move (the
README once named line 32 for a key on line 39) or the message changes. A quoted command-line
error is reproduced by passing its argument.

usage: config_error_samples.py ASYNCRL REPO_ROOT
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

FILE_ERR = re.compile(r"^config error: (configs/\S+?):(\d+): key '([^']+)': .*got '([^']*)'.*$")
ARG_ERR = re.compile(r"^config error: command line argument '([^']+)': .*$")


def samples(root):
    for doc in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
        for n, line in enumerate(open(doc, encoding="utf-8"), 1):
            line = line.strip()
            if line.startswith("config error: "):
                yield f"{os.path.relpath(doc, root)}:{n}", line


def run(binary, args, cwd):
    p = subprocess.run([binary, "config"] + args, cwd=cwd, capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout + p.stderr


def main():
    binary, root = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    bad, seen = [], 0
    for where, line in samples(root):
        seen += 1
        m, a = FILE_ERR.match(line), ARG_ERR.match(line)
        with tempfile.TemporaryDirectory() as tmp:
            if m:
                path, n, key, value = m.group(1), int(m.group(2)), m.group(3), m.group(4)
                shutil.copytree(os.path.join(root, "configs"), os.path.join(tmp, "configs"))
                lines = open(os.path.join(tmp, path), encoding="utf-8").read().split("\n")
                leaf = re.escape(key.split(".")[-1])
                if n > len(lines) or not re.match(rf"\s*{leaf}\s*:", lines[n - 1]):
                    got = lines[n - 1] if n <= len(lines) else "(past the end)"
                    bad.append(f"{where}: {path}:{n} does not hold '{key}': {got!r}")
                    continue
                lines[n - 1] = re.sub(rf"^(\s*{leaf}\s*:\s*)[^#]*", lambda g: g.group(1) + value + " ",
                                      lines[n - 1])
                open(os.path.join(tmp, path), "w", encoding="utf-8").write("\n".join(lines))
                rc, out = run(binary, ["-c", path], tmp)
            elif a:
                rc, out = run(binary, ["-c", "configs/demo.yaml", a.group(1)], root)
            else:
                bad.append(f"{where}: a quoted config error this check cannot reproduce: {line}")
                continue
        if rc == 0 or line not in out.splitlines():
            bad.append(f"{where}: quoted\n    {line}\n  the program printed (exit {rc})\n    "
                       + "\n    ".join(out.strip().splitlines()[-3:]))
    print(f"config_error_samples: {seen} quoted errors checked, {len(bad)} wrong")
    for b in bad:
        print("FAIL: " + b)
    sys.exit(1 if bad or seen == 0 else 0)


if __name__ == "__main__":
    main()

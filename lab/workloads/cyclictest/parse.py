"""cyclictest's per-thread lines: the threads' mean latency and the worst."""

from __future__ import annotations

import re

from lab.untrusted import to_float

_THREAD = re.compile(r"^T:\s*\d+\s.*\bAvg:\s*(\S+)\s+Max:\s*(\S+)\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    rows = [(to_float(a), to_float(m)) for a, m in _THREAD.findall(stdout)]
    vals = [(a, m) for a, m in rows if a is not None and m is not None and a >= 0 and m >= 0]
    if not vals or len(vals) != len(rows):
        return {"parse_error": "no cyclictest 'T: ... Avg: ... Max: ...' lines (or one is not a number)"}
    return {"cyclictest_avg_us": sum(a for a, _ in vals) / len(vals), "cyclictest_max_us": max(m for _, m in vals),
            "cyclictest_threads": len(vals)}  # fmt: skip

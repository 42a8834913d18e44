"""The kernel's cpulist format: '0-3,8,10-11'."""

from __future__ import annotations

import re
from collections.abc import Iterable


def parse_cpulist(text: str) -> list[int]:
    """'0-3,8,10-11' -> [0, 1, 2, 3, 8, 10, 11]; '' -> []."""
    out: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


MAX_CPU_ID = 8191  # Linux's NR_CPUS is at most 8192
_CPULIST = re.compile(r"\s*(?:\d{1,5}(?:-\d{1,5})?(?:,\d{1,5}(?:-\d{1,5})?)*)?\s*")


def checked_cpulist(text: str, max_cpu: int = MAX_CPU_ID) -> list[int] | None:
    """:func:`parse_cpulist` for text from outside (a guest): None, never an exception or a huge list,
    for anything that is not a cpulist of CPUs 0..``max_cpu``."""
    if not _CPULIST.fullmatch(text):
        return None
    cpus: list[int] = []
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            a, b = int(lo), int(hi or lo)
            if a > b or b > max_cpu:
                return None
            cpus.extend(range(a, b + 1))
    return cpus


def format_cpulist(ids: Iterable[int]) -> str:
    """[0, 1, 2, 5] -> '0-2,5'."""
    runs: list[list[int]] = []
    for x in sorted(set(ids)):
        if runs and runs[-1][1] == x - 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)

#!/usr/bin/env python3
"""Trace reading speed: numalab's reader against `trace-cmd report > /dev/null` on the same file.

    .venv/bin/python tests/bench/trace_parse.py [TRACE.DAT ...]

Without arguments it makes a busy trace first: a ring-2 VM running `pairs`
with sched_switch/sched_wakeup recorded (~150k events under TCG). Prints
figures; not a pass/fail test.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lab.analysis.numa import ANALYSIS_EVENTS  # noqa: E402
from lab.trace.tracedat import read_trace  # noqa: E402


def make_trace(tmp: Path) -> Path:
    out = tmp / "run"
    subprocess.run(
        [sys.executable, "-m", "lab.cli", "run", "--topology", "ring-2", "--workload", "pairs", "--duration", "10",
         "--event", "sched:sched_switch", "--event", "sched:sched_wakeup", "--trace-buffer-kb", "65536",
         "--out", str(out)],
        cwd=REPO, check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return out / "trace.dat"


def best(fn, n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    paths = [Path(p) for p in sys.argv[1:]]
    with tempfile.TemporaryDirectory() as tmp:
        if not paths:
            paths = [make_trace(Path(tmp))]
        for path in paths:
            total = sum(read_trace(path, ()).counts.values())
            tc = best(lambda p=path: subprocess.run(["trace-cmd", "report", "-i", str(p)], stdout=subprocess.DEVNULL))
            ours = best(lambda p=path: read_trace(p, ANALYSIS_EVENTS))
            full = best(lambda p=path: read_trace(p), n=3)
            print(f"{path}: {total} events")
            print(f"  trace-cmd report > /dev/null : {tc:.3f}s  ({total / tc / 1e6:.2f} M events/s)")
            print(
                f"  numalab read (NUMA events)   : {ours:.3f}s  ({total / ours / 1e6:.2f} M events/s), "
                f"{ours / tc:.2f}x trace-cmd (goal <= 1.5x, >= 1 M events/s)"
            )
            print(
                f"  numalab read (every event)   : {full:.3f}s  ({total / full / 1e6:.2f} M events/s), "
                f"{full / tc:.2f}x trace-cmd"
            )


if __name__ == "__main__":
    main()

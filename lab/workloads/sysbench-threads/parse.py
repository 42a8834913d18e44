"""sysbench threads' events, events a second and mean latency."""

from __future__ import annotations

import re

from lab.workloads.output_readers import numbers

_EVENTS = re.compile(r"^\s*total number of events:\s+(\S+)\s*$", re.MULTILINE)
_TIME = re.compile(r"^\s*total time:\s+(\S+?)s\s*$", re.MULTILINE)
_AVG = re.compile(r"^\s*avg:\s+(\S+)\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    events, secs, avg = numbers(_EVENTS, stdout), numbers(_TIME, stdout), numbers(_AVG, stdout)
    if not events or not secs or not avg or secs[-1] <= 0:
        return {"parse_error": "no sysbench 'total number of events', 'total time' and latency 'avg' lines"}
    return {"sysbench_events": events[-1], "sysbench_events_per_s": events[-1] / secs[-1],
            "sysbench_latency_avg_ms": avg[-1]}  # fmt: skip

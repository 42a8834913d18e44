"""perf bench sched messaging's runs: the mean of their ``Total time:`` (seconds a run, lower is better)."""

from __future__ import annotations

import re

from lab.workloads.output_readers import numbers

_TOTAL_TIME = re.compile(r"^\s*Total time:\s*(\S+)\s*\[sec\]\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    times = numbers(_TOTAL_TIME, stdout)
    if not times:
        return {"parse_error": "no perf bench sched messaging 'Total time:' line in the workload output"}
    return {"messaging_s": sum(times) / len(times), "messaging_runs": len(times)}

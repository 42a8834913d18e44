"""hackbench's runs: the mean of their ``Time:`` lines (seconds a run, lower is better) and how many."""

from __future__ import annotations

import re

from lab.workloads.output_readers import numbers

_TIME = re.compile(r"^Time:\s*(\S+)\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    times = numbers(_TIME, stdout)
    if not times:
        return {"parse_error": "no hackbench 'Time:' line in the workload output"}
    return {"hackbench_s": sum(times) / len(times), "hackbench_runs": len(times)}

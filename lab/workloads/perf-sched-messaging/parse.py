"""perf bench sched messaging's runs: the mean of their ``Total time:`` (seconds a run, lower is better)."""

from __future__ import annotations

import re

from lab.workloads.output_readers import mean_of_runs

_TOTAL_TIME = re.compile(r"^\s*Total time:\s*(\S+)\s*\[sec\]\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    return mean_of_runs(_TOTAL_TIME, stdout, "messaging_s", "perf bench sched messaging 'Total time:' line")

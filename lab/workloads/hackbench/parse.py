"""hackbench's runs: the mean of their ``Time:`` lines (seconds a run, lower is better) and how many."""

from __future__ import annotations

import re

from lab.workloads.output_readers import mean_of_runs

_TIME = re.compile(r"^Time:\s*(\S+)\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    return mean_of_runs(_TIME, stdout, "hackbench_s", "hackbench 'Time:' line")

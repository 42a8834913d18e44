"""perf bench sched pipe's runs: the mean time a round trip and round trips a second."""

from __future__ import annotations

import re

from lab.workloads.output_readers import numbers

PIPE_LOOPS = 2000  # round trips a run: the -l of workload.yaml's command
_USECS_OP = re.compile(r"^\s*(\S+)\s+usecs/op\s*$", re.MULTILINE)
_OPS_SEC = re.compile(r"^\s*(\S+)\s+ops/sec\s*$", re.MULTILINE)


def parse(stdout: str) -> dict:
    usecs, ops = numbers(_USECS_OP, stdout), numbers(_OPS_SEC, stdout)
    if not usecs or not ops or len(usecs) != len(ops):
        return {"parse_error": "no perf bench sched pipe 'usecs/op' and 'ops/sec' lines in the workload output"}
    return {"pipe_usecs_per_op": sum(usecs) / len(usecs), "pipe_ops_per_s": sum(ops) / len(ops),
            "pipe_runs": len(ops), "pipe_ops": len(ops) * PIPE_LOOPS}  # fmt: skip

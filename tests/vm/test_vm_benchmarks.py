"""Issue #23's everyday benchmarks from Debian packages, each in a real ring-2 guest (TCG, the stock
kernel): the host's tool and its libraries carried in, run scaled to the guest, its output read into
finite metrics that compare knows."""

from __future__ import annotations

import json
import math
import re

import pytest
from common import numalab

from lab.analysis.metrics import TWINS, get_metric

pytestmark = pytest.mark.vm

CASES = {
    "perf-sched-messaging": ("messaging_s",),
    "perf-sched-pipe": ("pipe_usecs_per_op", "pipe_ops_per_s"),
    "stress-ng-numa": ("stressng_ops_per_s", "stressng_ops_per_cpu_s"),
    "stress-ng-vm": ("stressng_ops_per_s", "stressng_ops_per_cpu_s"),
    "sysbench-memory": ("sysbench_mib_per_s",),
    "sysbench-threads": ("sysbench_events_per_s", "sysbench_latency_avg_ms"),
    "cyclictest": ("cyclictest_avg_us", "cyclictest_max_us"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_benchmark_runs_in_the_guest(tmp_path, name: str) -> None:
    out = tmp_path / name
    duration = "10" if name == "stress-ng-numa" else "3"  # one numa operation takes seconds under TCG
    proc = numalab("run", "--topology", "ring-2", "--workload", name, "--duration", duration, "--no-trace",
                   "--out", str(out), "--json", timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", (m["reason"], m["workload"].get("result"), (out / "workload.out").read_text()[-2000:])
    result = m["workload"]["result"]
    for key in CASES[name]:
        assert isinstance(result[key], float) and math.isfinite(result[key]) and result[key] > 0, result
        assert get_metric(f"workload.{key}").better in ("higher", "lower")
    if name == "cyclictest":  # every thread at the stated 1 ms interval (-d 0)
        intervals = re.findall(r"^T:.* I:\s*(\d+) ", (out / "workload.out").read_text(), re.MULTILINE)
        assert intervals and set(intervals) == {"1000"}, intervals
    # each throughput's twin: the same work over the vCPU threads' CPU seconds in the workload window
    run_s = m["vcpu_time"]["run_s"]
    for t in TWINS:
        if t.rate in CASES[name]:
            twin = m["metrics"]["per_vcpu_s"][t.key]
            assert twin == pytest.approx(result[t.work] * t.scale / run_s), (t, result, run_s)

"""perf bench numa mem's summary, as every perf-numa workload reads it (lab.workloads.output_readers)."""

from __future__ import annotations

from lab.workloads.output_readers import perf_numa_summary


def parse(stdout: str) -> dict:
    return perf_numa_summary(stdout)

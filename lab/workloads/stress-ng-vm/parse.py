"""stress-ng's --metrics-brief line for its vm stressor (lab.workloads.output_readers)."""

from __future__ import annotations

from lab.workloads.output_readers import stress_ng_metrics


def parse(stdout: str) -> dict:
    return stress_ng_metrics(stdout, "vm")

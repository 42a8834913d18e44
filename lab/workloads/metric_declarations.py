"""What a built-in workload's result means: each figure it reports that compare reads as a metric
(``workload.<name>``), with its label, unit, better direction and mean, and for a rate the count of the
same work its per-vCPU-second twin divides (lab.analysis.metrics builds its registry from these).

Each built-in declares its metrics under ``metrics:`` in its folder's workload.yaml (lab.workloads.registry); a
user's workload declares its own (lab.workloads.workload_type.UserMetric), named and twinned by the same rules.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TwinOf:
    """A rate's twin per vCPU CPU-second: ``work`` (a count in the same result) x ``scale`` over vCPU seconds."""

    work: str  # e.g. "bytes_touched"
    scale: float  # work units per count (1e-9: bytes -> GB)
    label: str


@dataclass(frozen=True)
class WorkloadMetric:
    name: str  # the result's key, compared as workload.<name>
    label: str
    unit: str
    better: str  # "higher" or "lower"
    # "hmean" only for rates (work per unit of time), as mmtests does for throughput; "amean" for the rest.
    mean: str = "amean"
    twin: TwinOf | None = None

    @property
    def twin_key(self) -> str | None:
        """``gbps`` -> ``gbps_per_vcpu_s``, ``round_trips_per_s`` -> ``round_trips_per_vcpu_s``."""
        if self.twin is None:
            return None
        return twin_name(self.name)

    @property
    def twin_unit(self) -> str:
        return twin_unit_of(self.unit)


# What every numalab memory workload reports: the figures a workload's own one comes after
# (lab.analysis.verdict.workload_figure).
MEMORY_FIGURES = ("elapsed_s", "gbps")


def is_rate_unit(unit: str) -> bool:
    """Whether a user's declared unit is a rate per second ("MiB/s", "1/s", "ops/s"): such a metric gets a
    per-vCPU-second twin (lab.analysis.metrics.per_vcpu_second)."""
    return unit.replace(" ", "").endswith("/s") and len(unit.strip()) > 2


def twin_name(name: str) -> str:
    """A rate's twin's name: ``mib_per_s`` -> ``mib_per_vcpu_s``, ``throughput`` -> ``throughput_per_vcpu_s``."""
    return f"{name.removesuffix('_per_s')}_per_vcpu_s"


def twin_unit_of(unit: str) -> str:
    """``MiB/s`` -> ``MiB/vCPU-s``."""
    return f"{unit.strip().removesuffix('/s')}/vCPU-s"

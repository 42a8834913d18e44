"""What a built-in workload's result means: each figure it reports that compare reads as a metric
(``workload.<name>``), with its label, unit, better direction and mean, and for a rate the count of the
same work its per-vCPU-second twin divides (lab.analysis.metrics builds its registry from these).

A workload's entry in lab.guest.workloads.WORKLOADS lists its metrics; the shared ones are here.
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


def rate(name: str, label: str, unit: str, work: str, twin_label: str, scale: float = 1.0) -> WorkloadMetric:
    """A throughput (higher is better, harmonic mean) with its per-vCPU-second twin."""
    return WorkloadMetric(name, label, unit, "higher", "hmean", TwinOf(work, scale, twin_label))


ELAPSED = WorkloadMetric("elapsed_s", "workload elapsed", "s", "lower")
GBPS = rate("gbps", "workload throughput", "GB/s", "bytes_touched", "workload throughput per vCPU CPU-second", 1e-9)
ROUND_TRIPS = rate(
    "round_trips_per_s", "pair round trips", "1/s", "round_trips", "pair round trips per vCPU CPU-second"
)
BALANCE = WorkloadMetric("balance_pct", "nodes 1/3 busy balance (nodes13)", "%", "higher")
CONVERGED = WorkloadMetric("converged_s", "perf bench convergence", "s", "lower")
HACKBENCH = WorkloadMetric("hackbench_s", "hackbench time a run", "s", "lower")
INSN = rate(
    "insn_per_s",
    "instructions per guest second (spin)",
    "1/s",
    "insns",  # how fast the host ran the guest's instructions
    "instructions per vCPU CPU-second (spin)",
)
REMOTE_RATIO = WorkloadMetric("remote_ratio", "remote/local memory latency (latency-matrix)", "x", "lower")

MEMORY = (ELAPSED, GBPS)  # what every numalab memory workload reports


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

"""Per-run metrics and the registry of comparable metrics (with their better direction)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lab.analysis.mmtests import autonuma_cost, deltas, derived_rows, hint_local_percent
from lab.analysis.numa import ANALYSIS_EVENTS, NUMA_KINDS, analyse_trace
from lab.errors import LabError
from lab.guest.readback import read_vmstat, read_vmstat_series
from lab.topology.model import Topology
from lab.trace.tracedat import read_trace, stats_lost

SERIES_KEYS = ("numa_hint_faults", "numa_hint_faults_local", "numa_pages_migrated", "numa_pte_updates")


def vmstat_series(run_dir: Path, t0: float | None) -> dict:
    """Cumulative NUMA counters per sample, from the workload start, and hint-local % per interval."""
    samples = read_vmstat_series(run_dir / "vmstat.series")
    if not samples:
        return {}
    start_t = t0 if t0 is not None else samples[0][0]
    first = samples[0][1]
    out: dict = {"t": [], **{k: [] for k in SERIES_KEYS}, "hint_local_pct": []}
    prev = first
    for t, vals in samples:
        out["t"].append(round(t - start_t, 2))
        for k in SERIES_KEYS:
            out[k].append(vals.get(k, 0) - first.get(k, 0))
        df = vals.get("numa_hint_faults", 0) - prev.get("numa_hint_faults", 0)
        dl = vals.get("numa_hint_faults_local", 0) - prev.get("numa_hint_faults_local", 0)
        out["hint_local_pct"].append(round(hint_local_percent(df, dl), 1) if df else None)
        prev = vals
    return out


def run_metrics(run_dir: Path, topo: Topology, recorded: tuple[str, ...], t0: float | None) -> dict:
    """Everything measurable about one run, as JSON-ready data."""
    out: dict = {"trace_problems": []}
    recorded_names = {e.split(":")[-1] for e in recorded}
    trace = run_dir / "trace.dat"
    if trace.exists():
        try:
            data = read_trace(trace, ANALYSIS_EVENTS)
            counts = data.counts
            out["events"] = {n: counts.get(n, 0) for n in sorted(recorded_names)}
            stats = stats_lost(run_dir / "trace-stats.txt")
            out["lost_events"] = sum(data.dropped.values()) + stats["overrun"]
            held = sum(counts.values())
            if stats["entries"] and held < stats["entries"]:
                data.problems.append(f"trace.dat holds {held} of the {stats['entries']} events the guest buffered")
            out["trace_problems"] = data.problems
            out["numa"] = analyse_trace(data, topo, recorded_names, t0 or 0.0)
        except LabError as err:
            out["trace_problems"].append(str(err))
    elif recorded:
        out["trace_problems"].append("no trace.dat in the run")
    start, end = read_vmstat(run_dir / "vmstat.start"), read_vmstat(run_dir / "vmstat.end")
    if start and end:
        d = deltas(start, end)
        d["hint_local_pct"] = round(
            hint_local_percent(d.get("numa_hint_faults", 0), d.get("numa_hint_faults_local", 0)), 2
        )
        d["autonuma_cost"] = round(
            autonuma_cost(d.get("numa_pte_updates", 0), d.get("numa_hint_faults", 0), d.get("numa_pages_migrated", 0)),
            2,
        )
        out["vmstat"] = d
        out["mmtests"] = derived_rows(d)
        out["vmstat_series"] = vmstat_series(run_dir, t0)
    return out


@dataclass(frozen=True)
class Metric:
    key: str  # dotted path, e.g. "vmstat.numa_pages_migrated"
    label: str
    unit: str
    better: str  # "lower" or "higher"

    def value(self, manifest: dict) -> float | None:
        node: object = manifest
        for part in self.key.split("."):
            if not isinstance(node, dict) or part not in node:
                return None
            node = node[part]
        return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def _flat(manifest: dict) -> dict:
    """The manifest plus short aliases under which metrics are addressed."""
    m = manifest.get("metrics", {})
    result = (manifest.get("workload") or {}).get("result") or {}
    return {
        "workload": {k: v for k, v in result.items() if isinstance(v, (int, float))}
        | {"elapsed_s": result.get("elapsed_s"), "gbps": result.get("gbps")},
        "events": m.get("events", {}),
        "vmstat": m.get("vmstat", {}),
        "timings": manifest.get("timings", {}),
        "trace": {"lost_events": m.get("lost_events")},
    }


METRICS: tuple[Metric, ...] = (
    Metric("workload.elapsed_s", "workload elapsed", "s", "lower"),
    Metric("workload.gbps", "workload throughput", "GB/s", "higher"),
    Metric("workload.round_trips_per_s", "pair round trips", "1/s", "higher"),
    Metric("workload.converged_s", "perf bench convergence", "s", "lower"),
    *(Metric(f"events.{k}", k, "events", "lower") for k in NUMA_KINDS),
    Metric("events.mm_migrate_pages", "mm_migrate_pages", "events", "lower"),
    Metric("vmstat.numa_pte_updates", "NUMA PTE updates", "pages", "lower"),
    Metric("vmstat.numa_hint_faults", "NUMA hint faults", "faults", "lower"),
    Metric("vmstat.numa_hint_faults_local", "NUMA hint local faults", "faults", "higher"),
    Metric("vmstat.hint_local_pct", "NUMA hint local percent", "%", "higher"),
    Metric("vmstat.numa_pages_migrated", "NUMA pages migrated", "pages", "lower"),
    Metric("vmstat.autonuma_cost", "AutoNUMA cost", "", "lower"),
    Metric("timings.boot_s", "boot time", "s", "lower"),
)
METRIC_KEYS = {m.key: m for m in METRICS}


def metric_values(manifest: dict) -> dict[str, float]:
    flat = _flat(manifest)
    if not flat["vmstat"].get("numa_hint_faults"):
        # mmtests reports 100% local with no hint faults; as a metric that
        # would make "no NUMA balancing" look perfect, so leave it out.
        flat["vmstat"] = {k: v for k, v in flat["vmstat"].items() if k != "hint_local_pct"}
    perf = ((manifest.get("workload") or {}).get("result") or {}).get("converged_s")
    if perf is not None:
        flat["workload"]["converged_s"] = perf
    return {m.key: v for m in METRICS if (v := m.value(flat)) is not None}


def get_metric(key: str) -> Metric:
    if key not in METRIC_KEYS:
        raise LabError(f"metric {key!r}: unknown (known: {', '.join(METRIC_KEYS)})")
    return METRIC_KEYS[key]

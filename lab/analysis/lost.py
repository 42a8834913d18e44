"""Lost trace events, counted once, and whether a run's trace is complete enough to count with.

The kernel's ring buffer loses events when a writer laps the reader
(``overrun``; in overwrite mode, the default) or a nested writer laps a commit
(``commit overrun``), or, in non-overwrite mode, drops them (``dropped
events``): the per-CPU ``stats`` count all three. When trace-cmd later reads
the buffer it finds a gap before a page and prints ``CPU:N [M EVENTS
DROPPED]``: the same losses seen a second time, from the reader's side. So
per CPU the loss is the larger of the two figures (the stats see every loss;
the notices are only a fallback for records without stats), never their sum.

A lost event cannot be told apart by its kind, so each analysed event is
expected to have lost the same share of its records as the trace as a whole:
``lost / (held + lost)``. Above :data:`INCOMPLETE_SHARE` the run's event
counts are too low to compare with whole runs, and the run is marked
``trace_incomplete``.
"""

from __future__ import annotations

from pathlib import Path

from lab.record_files import TRACE_STATS
from lab.trace.tracedat import stats_per_cpu

INCOMPLETE_SHARE = 0.01  # more than 1% of the records lost: the counts are not to be trusted


def stats_loss(cpu_stats: dict[str, int]) -> int:
    """Events one CPU's buffer lost, from its stats."""
    return cpu_stats.get("overrun", 0) + cpu_stats.get("commit overrun", 0) + cpu_stats.get("dropped events", 0)


def lost_per_cpu(stats: dict[int, dict[str, int]], dropped: dict[int, int]) -> dict[int, int]:
    """cpu -> events lost, each loss once: max(stats, trace-cmd's DROPPED notices)."""
    cpus = sorted(set(stats) | set(dropped))
    return {c: max(stats_loss(stats.get(c, {})), dropped.get(c, 0)) for c in cpus}


def completeness(held: int, lost: int, threshold: float = INCOMPLETE_SHARE) -> dict:
    """The share of records lost and whether it crosses the threshold."""
    total = held + lost
    share = lost / total if total else 0.0
    return {"lost_share": share, "trace_incomplete": share > threshold}


def is_incomplete(metrics: dict) -> bool:
    """A run's metrics say its trace lost too much (records made before the flag: from their counts)."""
    if "trace_incomplete" in metrics:
        return bool(metrics["trace_incomplete"])
    lost = metrics.get("lost_events") or 0
    held = sum(v for v in (metrics.get("events") or {}).values() if isinstance(v, int))
    return bool(lost) and completeness(held, lost)["trace_incomplete"]


def of_record(run_dir: Path, metrics: dict) -> dict:
    """{"lost_events", "trace_records", "lost_share", "trace_incomplete"} of a run record, without reading
    trace.dat: from its metrics, or, for a record made before each loss was counted once (its
    ``lost_events`` may hold the overruns twice), recounted from its trace-stats.txt."""
    keys = ("lost_events", "trace_records", "lost_share", "trace_incomplete")
    if "lost_share" in metrics:
        return {k: metrics.get(k) for k in keys}
    stats = stats_per_cpu(run_dir / TRACE_STATS)
    events = sum(v for v in (metrics.get("events") or {}).values() if isinstance(v, int))
    if not stats:
        lost = metrics.get("lost_events") or 0
        return {"lost_events": lost, "trace_records": events} | completeness(events, lost)
    lost = sum(stats_loss(c) for c in stats.values())
    held = events or sum(c.get("entries", 0) for c in stats.values())
    return {"lost_events": lost, "trace_records": held} | completeness(held, lost)


def describe(metrics: dict) -> str:
    """'6,049 of 8,891 trace records lost (68.0%)' or ''."""
    lost = metrics.get("lost_events") or 0
    if not lost:
        return ""
    share = metrics.get("lost_share")
    held = metrics.get("trace_records")
    if share is None or held is None:
        return f"{lost:,} trace events lost"
    return f"{lost:,} of {held + lost:,} trace records lost ({share * 100:.1f}%)"

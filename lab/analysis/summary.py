"""Per-run headline metrics: tracepoint counts, lost events, vmstat deltas and mmtests rows."""

from __future__ import annotations

from pathlib import Path

from lab.analysis.mmtests import deltas, derived_rows, hint_local_percent
from lab.errors import LabError
from lab.guest.readback import read_vmstat
from lab.topology.model import Topology
from lab.trace.tracedat import read_trace, record_overruns

# The events this summary counts; a run records them by default.
REQUIRES = ("sched_move_numa", "sched_swap_numa", "sched_stick_numa", "mm_migrate_pages")


def run_metrics(run_dir: Path, topo: Topology) -> dict:
    out: dict = {}
    trace = run_dir / "trace.dat"
    if trace.exists():
        try:
            data = read_trace(trace)
            counts = data.counts()
            out["events"] = {name: counts.get(name, 0) for name in REQUIRES} | {
                k: v for k, v in counts.items() if k not in REQUIRES
            }
            out["lost_events"] = sum(data.dropped.values()) + record_overruns(run_dir / "trace-stats.txt")
            if data.error:
                out["trace_error"] = data.error
        except LabError as err:
            out["trace_error"] = str(err)
    start, end = read_vmstat(run_dir / "vmstat.start"), read_vmstat(run_dir / "vmstat.end")
    if start and end:
        d = deltas(start, end)
        d["hint_local_pct"] = round(
            hint_local_percent(d.get("numa_hint_faults", 0), d.get("numa_hint_faults_local", 0)), 2
        )
        out["vmstat"] = d
        out["mmtests"] = derived_rows(d)
    return out

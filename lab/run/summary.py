"""The closing lines of a run, for a person: :func:`print_summary` of a manifest (lab.run.execute's result)."""

from __future__ import annotations

import sys

from lab.analysis.display import percent
from lab.analysis.kernel_complaints import summary as complaint_line
from lab.analysis.lost import describe as describe_lost
from lab.analysis.lost import is_incomplete
from lab.analysis.scx_topology import summary_words as machine_words
from lab.run import instrument_set
from lab.untrusted import term_safe
from lab.vm.hang import describe as describe_hang


def _secs(v: float | None) -> str:
    """'8.11s', or '-' (not '-s') for a stage the run never reached."""
    return "-" if v is None else f"{v}s"


def _scheduler(manifest: dict) -> str:
    """'  scheduler scx_simple (ops simple, enabled throughout)' for a sched_ext run; '' for the fair class."""
    s = manifest.get("scheduler") or {}
    if s.get("kind") != "sched_ext":
        return ""
    start = s.get("start") or {}
    how = "ejected" if s.get("ejected") else "enabled throughout"
    return (
        f"  scheduler {s.get('asked')} (ops {start.get('ops') or '-'}, {how}" + machine_words(s.get("topology")) + ")"
    )


def print_summary(manifest: dict, out=sys.stdout) -> None:
    """The closing lines of a run, for a person."""
    m = manifest.get("metrics", {})
    t = manifest["timings"]
    counts = m.get("events", {})
    vm = m.get("vmstat", {})
    complaints = (manifest.get("guest_topology") or {}).get("kernel_complaints") or []
    lines = [
        f"run {manifest['run_id']}: {manifest['status']} ({manifest['reason']})",
        f"  topology {manifest['topology']['name']}  kernel {manifest['kernel']['name']}"
        f" ({manifest['kernel'].get('guest_release') or '?'})  workload {manifest['workload']['name']}"
        f"  accel {manifest['accelerator']['name']}" + _scheduler(manifest),
        f"  boot {_secs(t['boot_s'])}  workload {_secs(t['workload_s'])}"
        f"  total {t['total_s']}s  guest topology {'ok' if manifest['guest_topology_ok'] else 'NOT ok'}"
        + (f", but the kernel complained ({len(complaints)})" if complaints else ""),
        *(f"  KERNEL: {complaint_line(c)}" for c in complaints),
    ]
    if counts:
        share = m.get("lost_share")
        lost_pct = f" {percent(share * 100)}% of its records" if share is not None else " events"
        incomplete = f" (INCOMPLETE: the trace lost{lost_pct})" if is_incomplete(m) else ""
        if m.get("trace_unreadable"):
            incomplete = " (NOT MEASURED: the trace could not be read)"
        lines.append(f"  events{incomplete} " + "  ".join(f"{k}={'-' if v is None else v}" for k, v in counts.items()))
    # (a run that failed has its reason; that its trace is missing then is no news)
    ok = manifest["status"] == "ok"
    for problem in [*(m.get("trace_problems", []) if ok else []), *manifest.get("guest_data_problems", [])]:
        lines.append(f"  PROBLEM: {problem}")
    for note in m.get("interface_notes", []):
        lines.append(f"  NOTE: {note}")
    if ok and m.get("trace_unreadable"):
        lines.append("    the trace could not be read: no event counts; numalab compare leaves this run out")
    if m.get("lost_events"):
        lines.append(f"  LOST EVENTS: {describe_lost(m)}")
        if is_incomplete(m):
            lines.append("    event counts are too low; numalab compare leaves this run out (--include-incomplete)")
    if vm:
        hl = vm.get("hint_local_pct")
        lines.append(
            f"  numa_pages_migrated={vm.get('numa_pages_migrated', '-')}"
            f"  numa_hint_faults={vm.get('numa_hint_faults', '-')}"
            f"  hint-local={'-' if hl is None or not vm.get('numa_hint_faults') else percent(hl, 2) + '%'}"
        )
    clock = manifest["accelerator"].get("clock") or {}
    if clock.get("mode") == "virtual" and (path := m.get("trajectory")):  # (lab.analysis.trajectory)
        parts = "  ".join(f"{k} {v}" for k, v in path.items() if k != "path")
        lines.append(f"  trajectory {path['path']} (seed {clock.get('seed', '-')}: {parts})")
    vt = manifest.get("vcpu_time") or {}
    if vt.get("run_s") is not None:
        twins = "".join(f"  {k}={v:.4g}" for k, v in (m.get("per_vcpu_s") or {}).items())
        wait = f", {vt['wait_s']:.2f}s waiting" if vt.get("wait_s") is not None else ""
        lines.append(f"  vCPU time {vt['run_s']:.2f}s{wait} over {vt['window_s']:g}s ({vt['n_vcpus']} vCPUs){twins}")
    elif vt.get("problem"):
        lines.append(f"  vCPU time not measured: {vt['problem']}")
    for sb in manifest.get("stalled_boots", []):
        lines.append(f"  boot attempt {sb['attempt']} stalled (no init after {sb['deadline_s']:.0f}s;"
                     f" {describe_hang(sb.get('vm_at_timeout'))});"
                     " booted again")  # fmt: skip
    if manifest.get("vm_at_timeout"):
        lines.append(f"  at the timeout: {describe_hang(manifest['vm_at_timeout'])}")
    lines += instrument_set.summary_lines(manifest)
    # The reason, the guest's release, complaints...: the guest's words. None reaches a terminal raw.
    print("\n".join(term_safe(ln) for ln in lines), file=out)

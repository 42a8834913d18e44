"""A run's trajectory fingerprint: which path the guest took, as a few short hashes.

Under ``--clock virtual`` with numalab's QEMU a run repeats exactly (docs/qemu.md, "Runs that repeat
exactly"): the same kernel, topology, workload and seed give the same NUMA events at the same guest times
and the same counters. Two runs took the same path when their fingerprints are equal; the parts say where
two paths differ (the events, /proc/vmstat, or only the workload's own output). Under the host's clock no
two runs are alike, and the fingerprint only says so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

from lab.trace.tracedat import Event

DIGITS = 12  # hex digits a part keeps: 48 bits, no accidental match among a lab's runs


def _digest(lines: Iterable[str]) -> str:
    h = hashlib.sha256()
    for line in lines:
        h.update(line.encode("utf-8", "replace") + b"\n")
    return h.hexdigest()[:DIGITS]


def event_lines(events: Iterable[Event]) -> Iterable[str]:
    """One line an event: its guest time (to the ns), CPU, task, name and fields, as the trace has them."""
    for e in events:
        fields = " ".join(f"{k}={v}" for k, v in sorted(e.fields.items()))
        yield f"{e.ts:.9f} {e.cpu} {e.comm}-{e.pid} {e.name} {fields}"


def fingerprint(events: list[Event] | None, vmstat_start: dict[str, int], vmstat_end: dict[str, int],
                workload_out: Path | None) -> dict:  # fmt: skip
    """``{"path": H, "events": H, "vmstat": H, "workload": H}``: ``path`` covers the parts there are
    (a part that is missing, the trace of a --no-trace run say, is left out of both)."""
    parts: dict[str, str] = {}
    if events is not None:
        parts["events"] = _digest(event_lines(events))
    if vmstat_start and vmstat_end:
        parts["vmstat"] = _digest(f"{k} {vmstat_start.get(k)} {vmstat_end.get(k)}"
                                  for k in sorted(set(vmstat_start) | set(vmstat_end)))  # fmt: skip
    if workload_out is not None and workload_out.is_file():
        parts["workload"] = hashlib.sha256(workload_out.read_bytes()).hexdigest()[:DIGITS]
    if not parts:
        return {}
    return {"path": _digest(f"{k} {v}" for k, v in sorted(parts.items())), **parts}

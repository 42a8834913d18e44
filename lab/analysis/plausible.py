"""A figure from the guest is checked before it is believed: against what the host itself knows.

Every reader of the guest's files is total (lab.untrusted): a number is finite and of bounded length. That
does not make it possible. Here each figure a run keeps is checked against the host's own observation:

* a duration the workload reports (``elapsed_s`` and every metric in seconds) is at least 0 and at most the
  workload window the host saw (the host's clock between the init's workload marks, lab.vm.console; the
  VM's whole run without them) plus the marks' slack;
* counters that only grow (``/proc/vmstat``'s, ``/proc/stat``'s CPU times) have deltas of at least 0 and at
  most 2^64 (the kernel's counters are 64-bit);
* the guest's CPU busy time is at most its vCPUs times the window its ``/proc/stat`` copies span;
* a built-in workload's figures are at least 0 (times, rates, counts); any workload's figure is at most
  2^64 in size.

Each failed check is a named problem; lab.run.collect puts them in ``guest_data_problems`` and the run is
``implausible`` (lab.run.status), which compare, the matrix and bisect leave out as every status but ok.

A record read back is held to the same checks (:func:`record_problems`, which lab.analysis.record's reader
applies to every record marked ok): one edited by hand or written by another tool has not been through them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lab.vm.console import SLACK_S, SLACK_SHARE, VmOutcome
from lab.workloads.registry import SECONDS_METRICS, WORKLOADS

MAX_COUNTER = 1 << 64


@dataclass(frozen=True)
class Windows:
    """What the host saw, in host seconds: the workload's window and the whole VM's (None: not known). Under
    ``--clock virtual`` guest seconds count instructions and may pass faster than the host's: the windows
    are then the init's marks' own uptimes, checked for order only, and the VM's run bounds nothing."""

    workload_s: float | None
    stat_s: float | None  # from before /proc/stat's first copy to after its last (the init's marks around them)
    vm_s: float | None

    def bound(self, seconds: float | None) -> tuple[float, float, str] | None:
        """(window, the most a guest duration over it may be, what the window is): ``seconds``, or the VM's
        whole run without it; None without either."""
        window = self.vm_s if seconds is None else seconds
        if window is None:
            return None
        return window, window + SLACK_S + SLACK_SHARE * window, "the VM's whole run" if seconds is None else ""


def host_windows(outcome: VmOutcome, host_clock: bool = True) -> Windows:
    """The host-observed windows from the init's marks that stood (lab.vm.console.check_marks); without
    ``host_clock`` (``--clock virtual``), the same marks' guest uptimes."""

    def at(name: str) -> float | None:
        st = outcome.stage(name)
        if st is None or st.contradicted:
            return None
        return st.host_s if host_clock else st.guest_uptime

    def span(a: str, b: str) -> float | None:
        x, y = at(a), at(b)
        return y - x if x is not None and y is not None and y >= x else None

    # /proc/stat is copied after the "topology" mark and before "done" (images/guest/init)
    vm_s = outcome.wall_s if host_clock else None
    return Windows(span("workload-start", "workload-end"), span("topology", "done"), vm_s)


def _durations(result: dict, seconds_keys: set[str]) -> list[tuple[str, float]]:
    return [(k, v) for k, v in result.items() if k in seconds_keys and _number(v)]


def _number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _figures(result: dict) -> list[tuple[str, float]]:
    """The result's numbers: its top-level ones and perf bench's summary values."""
    out = [(k, v) for k, v in result.items() if _number(v)]
    summary = result.get("summary")
    if isinstance(summary, dict):
        for name, row in summary.items():
            if isinstance(row, dict) and _number(row.get("value")):
                out.append((f"summary.{name}", row["value"]))
    return out


def result_problems(
    result: dict | None, windows: Windows, seconds_keys: set[str], signed_keys: set[str] | None = None
) -> list[str]:
    """The workload's own figures. ``seconds_keys``: those that are durations; ``signed_keys``: a user's
    workload's own figures, which may be below 0 (a difference, a temperature); None: every figure but the
    built-ins' (``--workload-cmd``)."""
    if not isinstance(result, dict) or result.get("parse_error"):
        return []
    problems = []
    for key, v in _figures(result):
        signed = key not in seconds_keys and (key in signed_keys if signed_keys is not None else True)
        if not math.isfinite(v):
            problems.append(f"the workload's {key} is not a finite number")
        elif abs(v) >= MAX_COUNTER:
            problems.append(f"the workload's {key} is {v:.4g}, beyond any 64-bit figure (an overflow)")
        elif v < 0 and not signed:
            problems.append(f"the workload's {key} is {v:g}, below 0")
    bounds = windows.bound(windows.workload_s)
    for key, v in _durations(result, seconds_keys) if bounds else ():
        window, bound, what = bounds
        if v > bound:
            problems.append(f"the workload's {key} is {v:g} s, longer than {what or 'the workload window'} the "
                            f"host saw ({window:.2f} s; {bound:.2f} s with the slack)")  # fmt: skip
    return problems


def counter_problems(metrics: dict) -> list[str]:
    """vmstat's counters between vmstat.start and vmstat.end: a delta below 0 or above 2^64 is impossible."""
    problems = []
    for key, d in sorted((metrics.get("vmstat") or {}).items()):
        if key in ("hint_local_pct", "autonuma_cost") or not _number(d):
            continue  # (derived from the counters, which are checked)
        if d < 0:
            problems.append(f"vmstat: {key} went down by {-d:,} between vmstat.start and vmstat.end (a counter "
                            "only grows)")  # fmt: skip
        elif d >= MAX_COUNTER:
            problems.append(f"vmstat: {key} grew by {d:.4g} between vmstat.start and vmstat.end, more than a 64-bit "
                            "counter can")  # fmt: skip
    return problems


def cpu_problems(node_cpu: dict, n_vcpus: int, windows: Windows) -> list[str]:
    """/proc/stat's busy and idle time per node: at least 0, and busy time at most vCPUs x the window."""
    if not node_cpu:
        return []
    problems = []
    for kind in ("busy_s", "idle_s"):
        for node, v in sorted((node_cpu.get(kind) or {}).items()):
            if _number(v) and v < 0:
                problems.append(f"/proc/stat: node {node}'s {kind.removesuffix('_s')} time went down by {-v:g} s "
                                "between stat.start and stat.end (a counter only grows)")  # fmt: skip
    busy = sum(v for v in (node_cpu.get("busy_s") or {}).values() if _number(v) and v > 0)
    if (bounds := windows.bound(windows.stat_s)) is None:
        return problems
    window, bound, what = bounds
    if busy > n_vcpus * bound:
        where = what or "between the copies"
        problems.append(f"/proc/stat: {busy:g} s of CPU busy time, more than {n_vcpus} vCPUs x the {window:.2f} s "
                        f"{where} the host saw ({n_vcpus * bound:.2f} s with the slack)")  # fmt: skip
    return problems


# --- a record read back ------------------------------------------------------------------------------------

# A stage's host_s is kept to 2 decimals, and timings.vm_s too: a window rebuilt from them may be this much short.
ROUNDING_S = 0.02


def _mapping(value: object) -> dict:
    return value if isinstance(value, dict) else {}


def _record_windows(manifest: dict, host_clock: bool) -> Windows:
    """:func:`host_windows` from what the record kept: its stages' host seconds (their guest uptimes under the
    virtual clock), the marks that stood, and ``timings.vm_s``."""
    at: dict[str, float] = {}
    stages = manifest.get("stages")
    for s in stages if isinstance(stages, list) else []:
        t = s.get("host_s" if host_clock else "uptime") if isinstance(s, dict) else None
        if isinstance(s, dict) and isinstance(s.get("name"), str) and not s.get("contradicted") and _number(t):
            at.setdefault(s["name"], t)

    def span(a: str, b: str) -> float | None:
        x, y = at.get(a), at.get(b)
        return y - x + (ROUNDING_S if host_clock else 0.0) if x is not None and y is not None and y >= x else None

    vm_s = _mapping(manifest.get("timings")).get("vm_s") if host_clock else None
    return Windows(span("workload-start", "workload-end"), span("topology", "done"),
                   vm_s + ROUNDING_S if _number(vm_s) and vm_s >= 0 else None)  # fmt: skip


def _shown_value(v: object) -> str:
    return "true" if v is True else "false" if v is False else repr(v)[:40]


def type_problems(manifest: dict, expected: set[str]) -> list[str]:
    """Figures a comparison reads as numbers that are something else: a workload's ``expected`` metric, a
    vmstat counter, a trace count, a per-vCPU-second twin or the boot time given as ``true`` (Python's bool is
    an int, and would pass for 1), a text or a list. None stays "not measured" (a tool's parser may give it)."""
    metrics = _mapping(manifest.get("metrics"))
    sections = (
        ("the workload's", {k: v for k, v in _mapping(_mapping(manifest.get("workload")).get("result")).items()
                            if k in expected}),
        ("vmstat:", _mapping(metrics.get("vmstat"))),
        ("events:", _mapping(metrics.get("events"))),
        ("per_vcpu_s:", _mapping(metrics.get("per_vcpu_s"))),
        ("timings:", {k: v for k, v in _mapping(manifest.get("timings")).items() if k == "boot_s"}),
    )  # fmt: skip
    return [f"{where} {key} is {_shown_value(v)}, not a number" for where, section in sections
            for key, v in sorted(section.items()) if v is not None and not _number(v)]  # fmt: skip


def _declared(workload: dict) -> list[dict]:
    decls = workload.get("metrics") if isinstance(workload.get("metrics"), list) else []
    return [d for d in decls if isinstance(d, dict) and isinstance(d.get("name"), str)]


def record_problems(manifest: dict) -> list[str]:
    """The checks a run makes before it writes its record (lab.run.collect), made again on a record read back:
    one edited by hand or written by another tool has not been through them. A figure its workload declares
    (a built-in's, lab.workloads.registry; a user's, the record's ``workload.metrics``) must be a number; a
    user's workload's own figures may be below 0 (its record does not say which it declared as signed), so
    only its durations are held to 0 and up. The windows are rebuilt from the record's stage marks and
    timings, to their rounding. Total over any JSON: what is not there is not checked."""
    workload = _mapping(manifest.get("workload"))
    result = workload.get("result")
    user = isinstance(workload.get("spec"), dict)
    decls = _declared(workload)
    builtin = WORKLOADS.get(workload.get("name")) if not user and isinstance(workload.get("name"), str) else None
    expected = {d["name"] for d in decls} | {m.name for m in (builtin.metrics if builtin else ())}
    seconds = set(SECONDS_METRICS) | {d["name"] for d in decls if d.get("unit") == "s"}
    clock = _mapping(manifest.get("accelerator")).get("clock")
    windows = _record_windows(manifest, _mapping(clock).get("mode", clock) != "virtual")
    metrics = _mapping(manifest.get("metrics"))
    node_cpu = {k: v for k, v in _mapping(metrics.get("node_cpu")).items() if isinstance(v, dict)}
    n_vcpus = _mapping(manifest.get("topology")).get("total_cpus")
    if not _number(n_vcpus):  # (then only the signs of the CPU times)
        n_vcpus, windows_cpu = 0, Windows(None, None, None)
    else:
        windows_cpu = windows
    return [
        *type_problems(manifest, expected),
        *result_problems(result if isinstance(result, dict) else None, windows, seconds, None if user else set()),
        *counter_problems({"vmstat": _mapping(metrics.get("vmstat"))}),
        *cpu_problems(node_cpu, n_vcpus, windows_cpu),
    ]

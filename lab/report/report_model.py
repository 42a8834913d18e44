"""Build a report from run records: report.json is the model, HTML and markdown are views of it.

Runs are re-analysed from their files (so a better analysis applies to old
runs, and a damaged trace.dat is caught and marked here). Runs are grouped by
kernel and NUMA-balancing settings; with two or more groups on the same
topology and workload, every group is compared against the first one.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from lab import __version__
from lab.analysis import finding
from lab.analysis.ab_plan import ABPlan
from lab.analysis.compare import Comparison, compare_runs
from lab.analysis.display import percent
from lab.analysis.kernel_complaints import read_complaints
from lab.analysis.kernel_complaints import summary as complaint_line
from lab.analysis.lost import describe as describe_lost
from lab.analysis.metrics import clock_mode, per_vcpu_second, run_metrics
from lab.analysis.record import RunRecord
from lab.errors import LabError
from lab.events import NUMA_DECISIONS
from lab.paths import json_text
from lab.record_files import (
    CONSOLE_LOG,
    DMESG_BOOT,
    MANIFEST,
    QEMU_ARGV,
    TOPOLOGY,
    TRACE_DAT,
    VMSTAT_SERIES,
    WORKLOAD_OUT,
)
from lab.report.ab_table import to_dict, to_markdown, to_text
from lab.report.html import render_html
from lab.report.kcidb import kcidb_data
from lab.report.perfetto import perfetto_trace
from lab.report.sections.access_section import slowdowns
from lab.untrusted import finite_copy

RAW_FILES = (MANIFEST, TRACE_DAT, CONSOLE_LOG, QEMU_ARGV, DMESG_BOOT, WORKLOAD_OUT, VMSTAT_SERIES, TOPOLOGY)


@dataclass
class ReportPaths:
    html: Path
    json: Path
    markdown: Path
    perfetto: list[Path]
    data: dict
    kcidb: Path | None = None


def group_key(r: RunRecord) -> tuple:
    knobs = tuple(sorted(r.knobs.items()))
    # (the scheduler last: runs of one kernel under the fair class and under a sched_ext scheduler are two groups)
    return (r.kernel_name, r.numa_balancing, knobs, r.access_matrix is not None, r.scheduler.label)


def group_label(key: tuple, schedulers: bool = False) -> str:
    """A group's label; with ``schedulers`` (some group ran a sched_ext scheduler) its scheduler too, the fair
    class's included, so that both sides of such an A/B say which ran."""
    kernel, balancing, knobs = key[:3]
    label = kernel + (f" scheduler={key[4]}" if schedulers and key[4:] else "")
    if balancing == "0":
        label += " balancing=off"
    elif balancing == "2":
        label += " balancing=tiering"
    elif balancing is None:
        label += " balancing=default"
    if key[3:] and key[3]:
        label += " access-matrix"  # instrumented: slower, so a group of its own
    return label


def _groups(runs: list[RunRecord]) -> list[tuple[str, list[RunRecord]]]:
    order: dict[tuple, list[RunRecord]] = {}
    for r in runs:
        order.setdefault(group_key(r), []).append(r)
    ext = any(k[4] != "fair" for k in order)
    labels = [group_label(k, ext) for k in order]
    # Two groups with the same label differ only in knobs: say which.
    if len(set(labels)) < len(labels):
        labels = [f"{group_label(k, ext)} {' '.join(f'{a}={b}' for a, b in k[2])}".strip() for k in order]
    return list(zip(labels, order.values()))


def comparisons_for(
    runs: list[RunRecord],
    plan: ABPlan | None = None,
    include_incomplete: bool = False,
    include_statuses: tuple[str, ...] = (),
) -> tuple[list[Comparison], list[str]]:
    """Each group against the first, per topology and workload; notes on what could not be compared.
    ``plan``: how the rows are read, its significance rule and minimum effect (--significance, --min-effect;
    lab.analysis.compare.compare_runs; None: the defaults); ``include_statuses``: the statuses besides ok whose
    runs count (--include-status, marked)."""
    notes: list[str] = []
    by_setup: dict[tuple[str, str], list[RunRecord]] = {}
    for r in runs:
        by_setup.setdefault((r.topology.name, r.workload_name), []).append(r)
    if len(by_setup) > 1:
        notes.append(
            "these runs mix topologies or workloads ("
            + "; ".join(f"{t}/{w}" for t, w in by_setup)
            + "): they are compared only within one topology and workload"
        )
    out = []
    for (topo, load), setup_runs in by_setup.items():
        groups = _groups(setup_runs)
        for label, group in groups[1:]:
            try:
                out.append(
                    compare_runs(
                        groups[0][1],
                        group,
                        plan,
                        labels=(groups[0][0], label),
                        include_incomplete=include_incomplete,
                        include_statuses=include_statuses,
                    )
                )
            except LabError as err:
                notes.append(f"{topo}/{load}: {groups[0][0]} vs {label}: {err}")
    return out, notes


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(path, start)


def run_entry(r: RunRecord, out_dir: Path) -> dict:
    m = r.manifest
    metrics = run_metrics(r.path, r.topology, r.trace_events, r.workload_start_uptime)
    w = m.get("workload") or {}
    if twins := per_vcpu_second(w.get("result"), m.get("vcpu_time"), w.get("metrics"), clock_mode(m)):
        metrics["per_vcpu_s"] = twins  # as the run stored them (lab.analysis.metrics.per_vcpu_second)
    return {
        "run_id": r.run_id,
        "path": _rel(r.path, out_dir),
        "status": r.status,
        "reason": r.reason,
        "label": r.label,
        "group": group_label(group_key(r)),  # (build_report names it as its groups are named)
        "scheduler": r.scheduler.to_dict(),
        "topology": m["topology"],
        "kernel": m["kernel"],
        "workload": m["workload"],
        "settings": r.settings,
        "accelerator": m["accelerator"],
        "placement": m.get("placement", {}),
        "backend": {k: v for k, v in m.get("backend", {}).items() if k != "argv"},
        "guest_topology_ok": m.get("guest_topology_ok"),
        "guest_topology_problems": (m.get("guest_topology") or {}).get("problems", []),
        "sched_cache": (m.get("guest_topology") or {}).get("sched_cache") or {},  # 7.x's cache-aware scheduling
        # Re-read from dmesg-boot.txt, so records made before the manifest carried them get them too.
        "guest_kernel_complaints": read_complaints(r.path),
        "trace_incomplete": bool(metrics.get("trace_incomplete")),
        "timings": r.timings,
        "vcpu_time": m.get("vcpu_time"),
        "metrics": metrics,
        "files": {f: _rel(r.path / f, out_dir) for f in RAW_FILES if (r.path / f).exists()},
        "console_tail": m.get("console_tail", []),
        "stages": r.stages,
        "access_matrix": r.access_matrix,
    }


def build_report(
    run_dirs: list[Path],
    out_html: Path,
    plan: ABPlan | None = None,
    include_incomplete: bool = False,
    include_statuses: tuple[str, ...] = (),
    kcidb: Path | None = None,
) -> ReportPaths:
    """Write OUT.html, OUT.json, OUT.md and OUT.perfetto/<run>.json (and with ``kcidb`` that file, in KCIDB's
    I/O format: lab.report.kcidb): all rendered first, then written to temporary files and renamed only when
    every one is written, so a failure leaves none of them. ``plan``: how the A/B tables are read, its
    significance rule and minimum effect (:func:`comparisons_for`; None: the defaults)."""
    if not run_dirs:
        raise LabError("report: give at least one run directory")
    runs = [RunRecord.load(d) for d in run_dirs]
    if out_html.is_dir():
        raise LabError(f"--out {out_html}: is a directory; give the HTML file to write")
    if kcidb is not None and kcidb.is_dir():
        raise LabError(f"--kcidb {kcidb}: is a directory; give the JSON file to write")
    out_dir = out_html.parent
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise LabError(f"--out {out_html}: cannot make {out_dir} ({err.strerror})") from None
    outputs: dict[Path, str] = {}
    comparisons, notes = comparisons_for(runs, plan, include_incomplete, include_statuses)
    entries = [run_entry(r, out_dir) for r in runs]
    groups = _groups(runs)
    if any(r.scheduler.is_ext for r in runs):  # (every run's group names its scheduler, as the groups do)
        for r, entry in zip(runs, entries, strict=True):
            entry["group"] = group_label(group_key(r), True)
    slow = slowdowns(runs)
    for entry in entries:
        if entry["access_matrix"] and entry["run_id"] in slow:
            entry["access_matrix"] = entry["access_matrix"] | {"slowdown": slow[entry["run_id"]]}
    pf_dir = out_html.with_suffix(".perfetto")
    perfetto_paths = []
    for r, entry in zip(runs, entries):
        if (r.path / TRACE_DAT).exists():
            path = pf_dir / f"{r.run_id}.json"
            outputs[path] = json_text(perfetto_trace(r))
            entry["perfetto"] = _rel(path, out_dir)
            perfetto_paths.append(path)
    report = {
        "format": "numalab-report/1",
        "numalab": __version__,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": entries,
        "groups": [{"label": label, "runs": [r.run_id for r in g]} for label, g in groups],
        "comparisons": [to_dict(c) | {"text": to_text(c), "finding": finding.to_dict(c)} for c in comparisons],
        "notes": notes,
        "include_statuses": list(include_statuses),  # (--include-status: counted in the comparisons, marked)
        "warnings": [f"{c.topology}/{c.workload}: {w}" for c in comparisons for w in c.warnings],
    }
    json_path, md_path = out_html.with_suffix(".json"), out_html.with_suffix(".md")
    # (a figure that came out NaN, from a record made before they were refused, is written as null)
    outputs[json_path] = json_text(finite_copy(report)[0], indent=2) + "\n"
    outputs[md_path] = render_markdown(report, comparisons)
    outputs[out_html] = render_html(report, comparisons)
    if kcidb is not None:
        if any(os.path.abspath(kcidb) == os.path.abspath(p) for p in outputs):
            raise LabError(f"--kcidb {kcidb}: is one of the report's own files; choose another name")
        outputs[kcidb] = json_text(kcidb_data(runs, comparisons), indent=2) + "\n"
    _write_all(outputs, out_html, {kcidb: "--kcidb"} if kcidb is not None else {})
    return ReportPaths(out_html, json_path, md_path, perfetto_paths, report, kcidb)


def _write_all(outputs: dict[Path, str], out_html: Path, options: dict[Path, str] | None = None) -> None:
    """Every file to a temporary name beside it, then every rename; on an error, no temporary stays
    and no output was replaced. ``options``: the option that named a file, where not --out."""
    options = options or {}
    temps: list[tuple[Path, Path]] = []
    made: list[Path] = []
    path = out_html
    try:
        for path, text in outputs.items():
            if not path.parent.exists():
                path.parent.mkdir(parents=True)
                made.append(path.parent)
            if path.is_dir():
                raise IsADirectoryError(21, "is a directory", str(path))
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            temps.append((tmp, path))
            tmp.write_text(text)
    except OSError as err:
        for tmp, _ in temps:
            with contextlib.suppress(OSError):  # (one whose folder is a file: NotADirectoryError)
                tmp.unlink()
        for d in reversed(made):
            with contextlib.suppress(OSError):
                d.rmdir()
        if path in options:
            raise LabError(f"{options[path]} {path}: cannot write {err.filename or path} ({err.strerror})") from None
        raise LabError(f"--out {out_html}: cannot write {err.filename or out_html} ({err.strerror})") from None
    for tmp, path in temps:
        os.replace(tmp, path)


def render_markdown(report: dict, comparisons: list[Comparison]) -> str:
    lines = [f"# numalab report ({report['generated']})", ""]
    for w in report.get("warnings", []):
        lines += [f"> **WARNING: {w}**", ""]
    for n in report["notes"]:
        lines += [f"> {n}", ""]
    lines += [
        "| run | status | topology | kernel | workload | accel | "
        + " | ".join(ev.short for ev in NUMA_DECISIONS)
        + " | lost | pages migrated | hint local % |",
        "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    blank = " | " * 10
    for r in report["runs"]:
        m = r["metrics"]
        events = m.get("events", {})
        vm = m.get("vmstat", {})
        hint = percent(vm["hint_local_pct"], 2) if vm.get("numa_hint_faults") else "no faults" if vm else "-"
        lost = m.get("lost_events", "-")
        if m.get("trace_unreadable"):
            lost = "**trace unreadable**"
        elif r.get("trace_incomplete"):
            lost = f"**{lost:,} ({percent(m['lost_share'] * 100)}%)**"
        cells = [
            r["run_id"], r["status"], r["topology"]["name"], r["group"], r["workload"]["name"],
            r["accelerator"]["name"].upper(),
            *("-" if (n := events.get(ev.name)) is None else n for ev in NUMA_DECISIONS),
            lost, vm.get("numa_pages_migrated", "-"), hint,
        ]  # fmt: skip
        lines.append("| " + " | ".join(map(str, cells)) + " |")
        for p in m.get("trace_problems", []):
            lines.append(f"|  | **trace: {p}**{blank}|")
        if r.get("trace_incomplete"):
            lines.append(
                f"|  | **trace incomplete: {describe_lost(m)}; event counts are low, and the A/B tables leave "
                f"this run out**{blank}|"
            )
        for c in r.get("guest_kernel_complaints", []):
            lines.append(f"|  | **guest kernel: {complaint_line(c)}**{blank}|")
    for c in comparisons:
        lines += ["", to_markdown(c) + finding.to_markdown(c)]
    return "\n".join(lines) + "\n"

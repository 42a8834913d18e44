"""Build a report from run records: report.json is the model, HTML and markdown are views of it.

Runs are re-analysed from their files (so a better analysis applies to old
runs, and a damaged trace.dat is caught and marked here). Runs are grouped by
kernel and NUMA-balancing settings; with two or more groups on the same
topology and workload, every group is compared against the first one.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from lab import __version__
from lab.analysis.compare import Comparison, compare_runs, to_dict, to_markdown, to_text
from lab.analysis.metrics import run_metrics
from lab.analysis.record import RunRecord
from lab.errors import LabError
from lab.paths import write_text_atomic

RAW_FILES = (
    "manifest.json",
    "trace.dat",
    "console.log",
    "qemu-argv.txt",
    "dmesg-boot.txt",
    "workload.out",
    "vmstat.series",
    "topology.txt",
)


@dataclass
class ReportPaths:
    html: Path
    json: Path
    markdown: Path
    perfetto: list[Path]
    data: dict


def group_key(r: RunRecord) -> tuple:
    s = r.manifest.get("settings", {})
    return (r.kernel_name, s.get("numa_balancing"), tuple(sorted((s.get("knobs") or {}).items())))


def group_label(key: tuple) -> str:
    kernel, balancing, knobs = key
    label = kernel
    if balancing == "0":
        label += " balancing=off"
    elif balancing is None:
        label += " balancing=default"
    return label


def _groups(runs: list[RunRecord]) -> list[tuple[str, list[RunRecord]]]:
    order: dict[tuple, list[RunRecord]] = {}
    for r in runs:
        order.setdefault(group_key(r), []).append(r)
    labels = [group_label(k) for k in order]
    # Two groups with the same label differ only in knobs: say which.
    if len(set(labels)) < len(labels):
        labels = [f"{group_label(k)} {' '.join(f'{a}={b}' for a, b in k[2])}".strip() for k in order]
    return list(zip(labels, order.values()))


def comparisons_for(runs: list[RunRecord], rule: str = "ci-overlap") -> tuple[list[Comparison], list[str]]:
    """Each group against the first, per topology and workload; notes on what could not be compared."""
    notes: list[str] = []
    by_setup: dict[tuple[str, str], list[RunRecord]] = {}
    for r in runs:
        by_setup.setdefault((r.topology.name, r.manifest["workload"]["name"]), []).append(r)
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
                out.append(compare_runs(groups[0][1], group, rule, labels=(groups[0][0], label)))
            except LabError as err:
                notes.append(f"{topo}/{load}: {groups[0][0]} vs {label}: {err}")
    return out, notes


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(path, start)


def run_entry(r: RunRecord, out_dir: Path) -> dict:
    m = r.manifest
    recorded = tuple(m.get("settings", {}).get("trace_events", []))
    metrics = run_metrics(r.path, r.topology, recorded, r.workload_start_uptime)
    return {
        "run_id": r.run_id,
        "path": _rel(r.path, out_dir),
        "status": r.status,
        "reason": m.get("reason", ""),
        "label": m.get("label", ""),
        "group": group_label(group_key(r)),
        "topology": m["topology"],
        "kernel": m["kernel"],
        "workload": m["workload"],
        "settings": m.get("settings", {}),
        "accelerator": m["accelerator"],
        "placement": m.get("placement", {}),
        "backend": {k: v for k, v in m.get("backend", {}).items() if k != "argv"},
        "guest_topology_ok": m.get("guest_topology_ok"),
        "guest_topology_problems": (m.get("guest_topology") or {}).get("problems", []),
        "timings": m.get("timings", {}),
        "metrics": metrics,
        "files": {f: _rel(r.path / f, out_dir) for f in RAW_FILES if (r.path / f).exists()},
        "console_tail": m.get("console_tail", []),
        "stages": m.get("stages", []),
    }


def build_report(run_dirs: list[Path], out_html: Path, rule: str = "ci-overlap") -> ReportPaths:
    """Write OUT.html, OUT.json, OUT.md and OUT.perfetto/<run>.json (each written whole, then renamed)."""
    from lab.report.html import render_html
    from lab.report.perfetto import perfetto_trace

    if not run_dirs:
        raise LabError("report: give at least one run directory")
    runs = [RunRecord.load(d) for d in run_dirs]
    out_dir = out_html.parent
    out_dir.mkdir(parents=True, exist_ok=True)
    comparisons, notes = comparisons_for(runs, rule)
    entries = [run_entry(r, out_dir) for r in runs]
    pf_dir = out_html.with_suffix(".perfetto")
    perfetto_paths = []
    for r, entry in zip(runs, entries):
        if (r.path / "trace.dat").exists():
            path = pf_dir / f"{r.run_id}.json"
            _write(path, json.dumps(perfetto_trace(r)))
            entry["perfetto"] = _rel(path, out_dir)
            perfetto_paths.append(path)
    report = {
        "format": "numalab-report/1",
        "numalab": __version__,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "runs": entries,
        "groups": [{"label": label, "runs": [r.run_id for r in g]} for label, g in _groups(runs)],
        "comparisons": [to_dict(c) | {"text": to_text(c)} for c in comparisons],
        "notes": notes,
    }
    json_path, md_path = out_html.with_suffix(".json"), out_html.with_suffix(".md")
    _write(json_path, json.dumps(report, indent=2) + "\n")
    _write(md_path, render_markdown(report, comparisons))
    _write(out_html, render_html(report, comparisons))
    return ReportPaths(out_html, json_path, md_path, perfetto_paths, report)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)


def render_markdown(report: dict, comparisons: list[Comparison]) -> str:
    lines = [f"# numalab report ({report['generated']})", ""]
    for n in report["notes"]:
        lines += [f"> {n}", ""]
    lines += [
        "| run | status | topology | kernel | workload | accel | move | swap | stick | pages migrated | hint local % |",
        "|---|---|---|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in report["runs"]:
        ev = r["metrics"].get("events", {})
        vm = r["metrics"].get("vmstat", {})
        cells = [
            r["run_id"], r["status"], r["topology"]["name"], r["group"], r["workload"]["name"],
            r["accelerator"]["name"].upper(), ev.get("sched_move_numa", "-"), ev.get("sched_swap_numa", "-"),
            ev.get("sched_stick_numa", "-"), vm.get("numa_pages_migrated", "-"), vm.get("hint_local_pct", "-"),
        ]  # fmt: skip
        lines.append("| " + " | ".join(map(str, cells)) + " |")
        for p in r["metrics"].get("trace_problems", []):
            lines.append(f"|  | **trace: {p}** | | | | | | | | | |")
    for c in comparisons:
        lines += ["", to_markdown(c)]
    return "\n".join(lines) + "\n"

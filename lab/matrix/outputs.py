"""What a matrix leaves behind: summary.json, junit.xml, index.html, and the gate verdicts."""

from __future__ import annotations

import dataclasses
import html
import json
import math
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

from lab.analysis import finding
from lab.analysis.ab_plan import ABPlan
from lab.analysis.compare import Comparison, compare_runs, pct_better
from lab.analysis.metrics import get_metric, metric_values
from lab.analysis.record import RunRecord
from lab.errors import LabError
from lab.events import MOVE_NUMA, SWAP_NUMA
from lab.matrix.definition import Gate, MatrixRun, MatrixSpec
from lab.matrix.schedule import MatrixOutcome, RunResult, host_of, run_dir
from lab.paths import json_text, write_text_atomic
from lab.record_files import MANIFEST
from lab.report.ab_table import to_dict, to_html

JUNIT_FAILURES = ("panic", "timeout", "topology-mismatch")


@dataclass
class GateResult:
    gate: Gate
    group: str  # e.g. "ring-4/numa01/default: stock vs patched"
    verdict: str  # "pass", "fail", "not judged", "not measured"
    detail: str

    def to_dict(self) -> dict:
        return {"gate": self.gate.name, "metric": self.gate.metric, "group": self.group, "verdict": self.verdict,
                "detail": self.detail}  # fmt: skip


def _records(out: Path, runs: list[MatrixRun]) -> dict[str, RunRecord]:
    recs = {}
    for r in runs:
        d = run_dir(out, r)
        if (d / MANIFEST).exists():
            recs[r.id] = RunRecord.load(d)
    return recs


def ab_groups(spec: MatrixSpec, runs: list[MatrixRun]) -> list[tuple[str, str, str, list[MatrixRun], list[MatrixRun]]]:
    """(label, baseline side, new side, baseline runs, new runs) per topology x workload x the other axis."""
    axis, base_value = next(iter(spec.baseline.items()))
    other = "setting" if axis == "kernel" else "kernel"
    cells: dict[tuple[str, str, str], dict[str, list[MatrixRun]]] = {}
    for r in runs:
        ax = r.axes()
        cells.setdefault((ax["topology"], ax["workload"], ax[other]), {}).setdefault(ax[axis], []).append(r)
    out = []
    for (topo, load, other_value), sides in cells.items():
        base = sides.get(base_value)
        if not base:
            continue
        for value, new in sides.items():
            if value != base_value:
                label = f"{topo}/{load}/{other}={other_value}: {base_value} vs {value}"
                out.append((label, base_value, value, base, new))
    return out


def comparisons(spec: MatrixSpec, runs: list[MatrixRun], recs: dict[str, RunRecord], min_effect: float | None = None,
                include_statuses: tuple[str, ...] = ()) -> list[tuple[str, Comparison]]:  # fmt: skip
    """Each A/B group's comparison, read by the spec's ``auto:`` significance rule (else the default) and its
    verdicts by ``min_effect`` (--min-effect), else the spec's ``auto.min_effect``, else each metric's own
    (lab.min_effect); the runs of ``include_statuses`` counted besides the ok ones (--include-status, marked)."""
    auto = spec.auto or ABPlan()
    plan = ABPlan(significance=auto.significance, min_effect=auto.min_effect if min_effect is None else min_effect)
    out = []
    for label, base_side, new_side, base, new in ab_groups(spec, runs):
        b = [recs[r.id] for r in base if r.id in recs]
        n = [recs[r.id] for r in new if r.id in recs]
        try:
            out.append((label, compare_runs(b, n, plan, labels=(base_side, new_side),
                                            include_statuses=include_statuses)))  # fmt: skip
        except LabError:
            continue  # no ok run on a side: the runs' statuses already say why
    return out


def evaluate_gates(spec: MatrixSpec, comps: list[tuple[str, Comparison]]) -> list[GateResult]:
    results = []
    for gate in spec.gates:
        if gate.metric not in spec.declared:  # (a metric a workload file declares is checked by the spec)
            get_metric(gate.metric)
        for label, c in comps:
            row = c.row(gate.metric)
            if row is None:
                results.append(GateResult(gate, label, "not measured", "the metric was not measured in these runs"))
                continue
            pct = pct_better(row.mean(row.base), row.mean(row.new), row.metric.better)
            worse = pct is not None and pct < -gate.worse_than_baseline_pct
            detail = (
                f"{'n/a' if pct is None else f'{pct:+.2f}%'} (+ is better), limit -{gate.worse_than_baseline_pct:g}%"
            )
            if row.included:  # (runs not marked ok counted: --include-status)
                detail += f"; {row.marked}"
            if row.caveat:  # (remote memory cost nothing in these runs: lab.analysis.caveats)
                detail += f"; {row.caveat}"
            if row.class_note:  # (NUMA balancing's row, a side under sched_ext: lab.analysis.scheduler_class)
                detail += f"; {row.class_note}"
            if gate.significant and row.significant is None:
                verdict = "not judged"
                detail += "; significance needs >= 3 ok runs per side"
            elif worse and (row.significant or not gate.significant):
                verdict = "fail"
            else:
                verdict = "pass"
            results.append(GateResult(gate, label, verdict, detail))
    return results


def _seconds(value: object) -> float | None:
    """A time in seconds read back from a file: a finite number >= 0 (and below a year), else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    return value if math.isfinite(value) and 0 <= value < 366 * 86400 else None


def recorded_times(dirs: list[Path]) -> dict[str, tuple[float, float | None]]:
    """Run id -> (wall, CPU) seconds as the matrix invocation that made the run measured them, from the
    summary.json of ``dirs`` (a shard's, or this directory's from an earlier invocation); the first directory
    that has a run wins. A missing or unreadable summary, or an entry that is not a time, is passed over:
    the run's own record then gives its wall time (:func:`write_outputs`)."""
    times: dict[str, tuple[float, float | None]] = {}
    for d in dirs:
        try:
            runs = json.loads((d / "summary.json").read_bytes()).get("runs")
        except (OSError, ValueError, AttributeError, RecursionError):
            continue
        for entry in runs if isinstance(runs, list) else []:
            if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
                continue
            wall = _seconds(entry.get("wall_s"))
            if wall and entry["id"] not in times:  # 0: an entry that never had a time
                times[entry["id"]] = (wall, _seconds(entry.get("cpu_s")))
    return times


def _timed(res: RunResult, rec: RunRecord | None, times: dict[str, tuple[float, float | None]]) -> RunResult:
    """A run done before this invocation, with the times it was run in (not 0): as recorded in a summary,
    else the record's own total time (its CPU time then unknown)."""
    if not res.resumed or res.status == "not-run":
        return res
    if res.id in times:
        wall, cpu = times[res.id]
    elif rec is not None:
        wall, cpu = _seconds((rec.manifest.get("timings") or {}).get("total_s")) or 0.0, None
    else:
        return res
    return dataclasses.replace(res, wall_s=wall, cpu_s=cpu)


def write_outputs(spec: MatrixSpec, runs: list[MatrixRun], out: Path, outcome: MatrixOutcome | None,
                  shard: tuple[int, int] | None = None, sources: list[Path] | None = None,
                  min_effect: float | None = None, include_statuses: tuple[str, ...] = ()) -> dict:  # fmt: skip
    """summary.json, junit.xml and index.html for the runs in ``out``; returns the summary. Runs that this
    invocation did not run keep the times measured when they ran, from ``sources``' summaries (the shards of a
    merge) or ``out``'s own earlier one."""
    recs = _records(out, runs)
    times = recorded_times([*(sources or []), out])
    known = {r.id: r for r in outcome.results} if outcome else {}
    results: list[RunResult] = []
    for r in runs:
        if r.id in known:
            results.append(_timed(known[r.id], recs.get(r.id), times))
        elif r.id in recs:
            rec = recs[r.id]
            res = RunResult(r.id, rec.status, rec.reason, resumed=True, host=host_of(rec.manifest))
            results.append(_timed(res, rec, times))
        else:
            results.append(RunResult(r.id, "not-run", "not run yet (interrupted, or a shard's other part)"))
    comps = comparisons(spec, runs, recs, min_effect, include_statuses)
    gates = evaluate_gates(spec, comps)
    counts: dict[str, int] = {}
    for res in results:
        counts[res.status] = counts.get(res.status, 0) + 1
    summary = {
        "format": "numalab-matrix/1",
        "spec": spec.name,
        "source": spec.source,
        "fingerprint": spec.fingerprint(),
        "shard": list(shard) if shard else None,
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "totals": counts | {"runs": len(results)},
        "runs": [
            res.to_dict()
            | {
                "axes": r.axes(),
                "repeat": r.repeat,
                "dir": f"runs/{r.id}",
                "metrics": metric_values(recs[r.id].manifest) if r.id in recs else {},
            }
            for r, res in zip(runs, results)
        ],  # fmt: skip
        "include_statuses": list(include_statuses),  # (--include-status: counted in the comparisons, marked)
        "comparisons": [to_dict(c) | {"group": label, "finding": finding.to_dict(c)} for label, c in comps],
        "gates": [g.to_dict() for g in gates],
        "gates_failed": sum(g.verdict == "fail" for g in gates),
    }
    if outcome:
        u = outcome.utilisation
        summary["timing"] = {"wall_s": round(outcome.wall_s, 1), "cpu_s": round(outcome.cpu_s, 1),
                             "cores": outcome.cores, "utilisation": None if u is None else round(u, 3)}  # fmt: skip
    _write(out / "summary.json", json_text(summary, indent=2) + "\n")
    _write(out / "junit.xml", junit_xml(spec, runs, results, gates))
    _write(out / "index.html", overview_html(spec, runs, results, comps, gates, recs))
    return summary


def junit_xml(spec: MatrixSpec, runs: list[MatrixRun], results: list[RunResult], gates: list[GateResult]) -> str:
    suite = ET.Element("testsuite", name=f"numalab.{spec.name}")
    failures = errors = skipped = 0
    for r, res in zip(runs, results):
        case = ET.SubElement(suite, "testcase", classname=f"numalab.{r.topology.label}.{r.workload.name}",
                             name=r.id, time=f"{res.wall_s:.1f}")  # fmt: skip
        if res.status in JUNIT_FAILURES:
            failures += 1
            ET.SubElement(case, "failure", message=f"{res.status}: {res.reason}", type=res.status)
        elif res.status == "not-run":
            skipped += 1
            ET.SubElement(case, "skipped", message=res.reason)
        elif res.status != "ok":
            errors += 1
            ET.SubElement(case, "error", message=f"{res.status}: {res.reason}", type=res.status)
    for g in gates:
        case = ET.SubElement(
            suite, "testcase", classname=f"numalab.{spec.name}.gates", name=f"{g.gate.name} [{g.group}]"
        )
        if g.verdict == "fail":
            failures += 1
            ET.SubElement(case, "failure", message=g.detail, type="gate")
        elif g.verdict != "pass":
            skipped += 1
            ET.SubElement(case, "skipped", message=f"{g.verdict}: {g.detail}")
    suite.set("tests", str(len(runs) + len(gates)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    suite.set("skipped", str(skipped))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2430}h1{font-size:22px}h2{margin-top:28px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d5dbe3;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f1f4f8}.ok{background:#dff3e4}.bad{background:#fbe0e0}.warn{background:#fff4d6}
.better{background:#c9efd2}.worse{background:#f7caca}a{color:#1a5fb4}.banner{padding:8px 12px;border-radius:6px;
background:#fff4d6;border:1px solid #e6c35c;margin:8px 0}small{color:#5b6675}
"""


def overview_html(spec, runs, results, comps, gates, recs) -> str:
    e = html.escape
    by_id = dict(zip([r.id for r in runs], results))
    cols = list(dict.fromkeys((r.kernel.name, r.setting.name) for r in runs))
    rows = list(dict.fromkeys((r.topology.label, r.workload.name) for r in runs))
    head = "".join(f"<th>{e(k)}<br><small>{e(s)}</small></th>" for k, s in cols)
    body = []
    for topo, load in rows:
        cells = []
        for k, s in cols:
            these = [r for r in runs if (r.topology.label, r.workload.name, r.kernel.name, r.setting.name)
                     == (topo, load, k, s)]  # fmt: skip
            parts = []
            for r in these:
                res = by_id[r.id]
                cls = "ok" if res.status == "ok" else ("warn" if res.status == "not-run" else "bad")
                vals = metric_values(recs[r.id].manifest) if r.id in recs else {}
                detail = ""
                if vals:
                    moves = int(vals.get(f"events.{MOVE_NUMA.name}", 0))
                    swaps = int(vals.get(f"events.{SWAP_NUMA.name}", 0))
                    migrated = int(vals.get("vmstat.numa_pages_migrated", 0))
                    detail = f" <small>{MOVE_NUMA.short} {moves} {SWAP_NUMA.short} {swaps} migr {migrated}</small>"
                has_report = r.id in recs and (recs[r.id].path / "report.html").exists()
                link = f"runs/{r.id}/report.html" if has_report else f"runs/{r.id}/"
                parts.append(f'<div class="{cls}"><a href="{e(link)}">r{r.repeat}</a> {e(res.status)}{detail}</div>')
            cells.append(f"<td>{''.join(parts) or '-'}</td>")
        body.append(f"<tr><th>{e(topo)}<br><small>{e(load)}</small></th>{''.join(cells)}</tr>")
    accel = sorted({rec.accelerator for rec in recs.values()})
    banner = ('<p class="banner">These runs used <b>TCG</b> software emulation: compare runs with each other, '
              "not with hardware.</p>") if "tcg" in accel else ""  # fmt: skip
    gate_rows = "".join(
        f'<tr class="{"bad" if g.verdict == "fail" else "ok" if g.verdict == "pass" else "warn"}"><td>{e(g.gate.name)}'
        f"</td><td>{e(g.group)}</td><td>{e(g.verdict)}</td><td>{e(g.detail)}</td></tr>"
        for g in gates
    )
    gates_html = (f"<h2>Gates</h2><table><tr><th>gate</th><th>comparison</th><th>verdict</th><th>detail</th></tr>"
                  f"{gate_rows}</table>") if gates else ""  # fmt: skip
    ab = "".join(to_html(c) for _, c in comps) or "<p>No A/B comparison (one kernel and one setting).</p>"
    counts: dict[str, int] = {}
    for res in results:
        counts[res.status] = counts.get(res.status, 0) + 1
    totals = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    return f"""<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>numalab matrix {e(spec.name)}</title>
<style>{_CSS}</style></head><body>
<h1>numalab matrix: {e(spec.name)}</h1><p>{e(spec.description)}</p>
<p>{len(runs)} runs: {e(totals)}. Accelerator: <b>{e(", ".join(a.upper() for a in accel) or "-")}</b>.
Baseline: {e(", ".join(f"{k}={v}" for k, v in spec.baseline.items()))}.</p>{banner}
<h2>Runs</h2><table><tr><th>topology / workload</th>{head}</tr>{"".join(body)}</table>
{gates_html}<h2>A/B against the baseline</h2>{ab}
<p><small>summary.json, junit.xml; per-run records under runs/.</small></p></body></html>
"""


def _write(path: Path, text: str) -> None:
    write_text_atomic(path, text)

"""The reproduction report of ``numalab reproduce``: markdown, a self-contained HTML page, JSON.

Per comparison and expected metric: the seed's figure, ours (baseline mean
-> new mean, %diff with + better), the expected and measured direction,
numalab's verdict (lab.analysis.judgement: "same within ±1%" only where the
equivalence test shows it, else undecided), the outcome
(lab.analysis.expectations), significance and repeats, and the runs a side
the observed variance says a decision would need.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from lab.paths import json_text, write_text_atomic

# A lab.seeds.reproduce.Reproduction (not imported: reports sit below the matrix layer that runs them).
Reproduction = Any


def _num(v: float | None) -> str:
    if v is None:
        return "n/a"
    return f"{v:.4g}" if abs(v) >= 1e5 else f"{v:.2f}"


def rows(rep: Reproduction) -> list[dict]:
    out = []
    for cell, c in rep.checks:
        v = c.verdict
        if v.significant is None:
            sig = "not judged"
        else:
            sig = f"{'significant' if v.significant else 'not significant'} ({v.significance})"
        out.append({
            "cell": cell,
            "comparison": f"{v.new_label} vs {v.base_label}",
            "metric": v.metric,
            "seed": c.expectation.seed,
            "expected": c.expectation.direction,
            "ours": f"{v.mean_name} {_num(v.mean_base)} -> {_num(v.mean_new)}",
            "pct": v.diff,
            "measured": v.moved,
            "verdict": v.decision,
            "outcome": c.outcome,
            "significance": sig,
            "repeats": f"{v.n_base}+{v.n_new}",
            "needed": "-" if v.needed_per_side is None else f"~{v.needed_per_side}",
            "line": v.line(),
        })  # fmt: skip
    return out


def tally(rep: Reproduction) -> dict[str, int]:
    out: dict[str, int] = {}
    for _cell, c in rep.checks:
        out[c.outcome] = out.get(c.outcome, 0) + 1
    return out


def to_json(rep: Reproduction) -> dict:
    return {
        "seed": rep.seed.id,
        "thread": rep.seed.title,
        "matrix": rep.spec.name,
        "source": _repo_relative(rep.spec.source),
        "baseline": rep.spec.baseline,
        "auto": rep.spec.auto.to_dict() if rep.spec.auto else None,  # (the A/B plan, by its names)
        "context": rep.context,
        "cells": rep.cells,
        "tally": tally(rep),
        "checks": [{"cell": cell, **c.to_dict()} for cell, c in rep.checks],
    }


_MEANS = (
    "Means as in `numalab compare` (Hmean for rates such as GB/s and round trips per second, Amean for "
    'everything else); %diff compares them, + is better. "means moved" is the sign of %diff whether '
    'significant or not; significance is judged on the per-run values by the rule named. "verdict" is '
    "numalab's own (lab.analysis.judgement): the sides are called the same, within ±the minimum effect, only where "
    "the equivalence test shows it (two one-sided Welch tests, α = 0.05); otherwise the verdict is undecided until "
    'a difference is significant. "runs/side needed" is the estimate from the observed spread (80% power, '
    "α = 0.05) of the runs a decision needs: to show the difference, or, for one inside the minimum effect, to "
    "show the sides the same."
)

_COLS = (("cell", "comparison"), ("comparison", "A/B"), ("metric", "metric"), ("seed", "seed's figure"),
         ("expected", "seed's direction"), ("ours", "ours (A -> B)"), ("pct", "%diff (+ better)"),
         ("measured", "means moved"), ("verdict", "verdict"), ("outcome", "outcome"), ("significance", "significance"),
         ("repeats", "runs A+B"), ("needed", "runs/side needed"))  # fmt: skip


def _repo_relative(path: str) -> str:
    repo = Path(__file__).resolve().parents[2]
    try:
        return str(Path(path).resolve().relative_to(repo))
    except ValueError:
        return path


def _setup_lines(rep: Reproduction) -> list[str]:
    s, ctx = rep.spec, rep.context
    a = s.auto
    topo = sorted({r.topology.label for r in s.runs})
    loads = sorted({f"{r.workload.name} ({r.workload.duration:g} s)" for r in s.runs})
    kernels = ", ".join(k.name for k in s.kernels)
    settings = sorted({f"{r.setting.name} (numa_balancing {r.setting.numa_balancing})" for r in s.runs})
    lines = [
        f"matrix `{_repo_relative(s.source)}`; baseline {next(iter(s.baseline.items()))[0]} "
        f"`{next(iter(s.baseline.values()))}`",
        f"topologies: {', '.join(topo)}; workloads: {', '.join(loads)}",
        f"kernels: {kernels}; settings: {', '.join(settings)}",
    ]
    if a:
        lines.append(
            f"repeats: auto, {a.min_pairs}..{a.max_pairs} a side, deciding on {', '.join(a.decide)} "
            f"({a.significance})"
            + (f", budget {a.time_budget:g} s" if a.time_budget else "")
            + (f"; max as run: {', '.join(map(str, ctx['max_pairs']))}" if ctx.get("max_pairs") else "")
        )
        # fmt: skip
    if ctx:
        bits = [f"generated {ctx.get('generated_utc', '?')}"]
        if "runs_used" in ctx:
            bits.append(f"{ctx['runs_used']} runs started {ctx['first_run_utc']} .. {ctx['last_run_utc']}, "
                        f"{ctx['run_time_s']:.0f} s of run time together")  # fmt: skip
        if "loadavg_start" in ctx and ctx.get("wall_s", 0) >= 60:
            bits.append(f"{ctx.get('host_cpus')} host CPUs shared with other engineers' VMs, 1-minute load average "
                        f"{ctx.get('loadavg_start')}..{ctx.get('loadavg_end')} at the start and end of the "
                        f"{ctx.get('sessions', 1)} recorded invocation(s)")  # fmt: skip
        lines.append("; ".join(bits))
    return lines


def notes_path(out_dir: Path, stem: str) -> Path:
    """Hand-written notes on a reproduction (what the figures mean, what does not reproduce and why), kept next
    to the generated report and included in it."""
    return out_dir / f"{stem}.notes.md"


def to_markdown(rep: Reproduction, notes: str = "") -> str:
    variant = f" ({rep.seed.matrix})" if rep.seed.default_matrix else ""
    out = [f"# Seed {rep.seed.id} reproduction{variant}", "", f"Thread: {rep.seed.title}", ""]
    out += [f"- {ln}" for ln in _setup_lines(rep)]
    if rep.spec.description:
        out += ["", rep.spec.description.strip()]
    t = tally(rep)
    out += ["", "Outcomes: " + (", ".join(f"{k} {v}" for k, v in t.items()) or "none"), ""]
    out.append("| " + " | ".join(h for _k, h in _COLS) + " |")
    out.append("|" + "---|" * len(_COLS))
    for r in rows(rep):
        out.append("| " + " | ".join(str(r[k]).replace("|", "/") for k, _h in _COLS) + " |")
    out += ["", _MEANS, "", "## Comparisons", ""]
    out += ["| cell | repeats | runs ok | stopped | detail |", "|---|---|---|---|---|"]
    for c in rep.cells:
        failed = f" (not ok: {', '.join(c['failed_statuses'])})" if c["failed_statuses"] else ""
        out.append(f"| {c['cell']} | {c['repeats']} | {c['ok']}/{c['runs']}{failed} | {c['stopped'] or '-'} | "
                   f"{c['detail'] or '-'} |")  # fmt: skip
    aside = rep.context.get("set_aside") or []
    if aside:
        out += ["", "Runs set aside and redone with their pair (in OUT/clock-excluded/):", ""]
        out += [f"- {x}" for x in aside]
    excluded = [x for c in rep.cells for x in c.get("excluded", [])]
    if excluded:
        out += ["", "Runs left out (their figures are not comparable):", ""] + [f"- {x}" for x in excluded]
    out += ["", "## Verdict lines", "", "```"] + [r["line"] for r in rows(rep)] + ["```", ""]
    why = [(c.expectation.metric, c.expectation.why) for _cell, c in rep.checks if c.expectation.why]
    if why:
        out += ["## Why the seed's direction is expected", ""]
        out += [f"- `{m}`: {w}" for m, w in dict(why).items()] + [""]
    if notes.strip():
        out += ["## Notes (written after the runs)", "", notes.strip(), ""]
    return "\n".join(out)


_CSS = """body{font-family:sans-serif;margin:2em;max-width:90em}table{border-collapse:collapse;font-size:90%}
td,th{border:1px solid #ccc;padding:3px 6px;text-align:left}th{background:#eee}
.reproduced{background:#d9f2d9}.contradicted{background:#f6d0d0}.same-direction-not-significant{background:#fff3c4}
.not-reproduced{background:#f3e1c8}.no-data{color:#777}pre{background:#f6f6f6;padding:1em;overflow-x:auto}
.tcg{background:#fde2b8;padding:.5em;border:1px solid #e0a040}pre.notes{white-space:pre-wrap}"""


def to_html(rep: Reproduction, notes: str = "") -> str:
    e = html.escape
    head = "".join(f"<th>{e(h)}</th>" for _k, h in _COLS)
    body = []
    for r in rows(rep):
        cls = r["outcome"].replace(",", "").replace(" ", "-")
        body.append("<tr>" + "".join(
            f'<td class="{cls}">{e(str(r[k]))}</td>' if k == "outcome" else f"<td>{e(str(r[k]))}</td>"
            for k, _h in _COLS) + "</tr>")  # fmt: skip
    cells = "".join(
        f"<tr><td>{e(c['cell'])}</td><td>{c['repeats']}</td><td>{c['ok']}/{c['runs']}</td>"
        f"<td>{e(c['stopped'] or '-')}</td><td>{e(c['detail'] or '-')}</td></tr>"
        for c in rep.cells
    )
    accels = sorted({c.verdict.accelerator for _cell, c in rep.checks})
    tcg = ('<p class="tcg">These runs used TCG software emulation: guest "NUMA" memory is host memory on one '
           "node, so remote accesses cost nothing and throughput cannot reflect locality.</p>"
           if any("tcg" in a for a in accels) else "")  # fmt: skip
    setup = "".join(f"<li>{e(ln)}</li>" for ln in _setup_lines(rep))
    desc = f"<p>{e(rep.spec.description.strip())}</p>" if rep.spec.description else ""
    t = tally(rep)
    lines = "\n".join(e(r["line"]) for r in rows(rep))
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>Seed {e(rep.seed.id)} reproduction</title>"
        f"<style>{_CSS}</style></head><body><h1>Seed {e(rep.seed.id)} reproduction</h1>"
        f"<p>Thread: {e(rep.seed.title)}</p>{tcg}<ul>{setup}</ul>{desc}"
        f"<p>Outcomes: {e(', '.join(f'{k} {v}' for k, v in t.items()) or 'none')}</p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table><p>{e(_MEANS)}</p>"
        f"<h2>Comparisons</h2><table><thead><tr><th>cell</th><th>repeats</th><th>runs ok</th><th>stopped</th>"
        f"<th>detail</th></tr></thead><tbody>{cells}</tbody></table>"
        + (
            "<p>Runs left out (their figures are not comparable):</p><ul>"
            + "".join(f"<li>{e(x)}</li>" for c in rep.cells for x in c.get("excluded", []))
            + "</ul>"
            if any(c.get("excluded") for c in rep.cells)
            else ""
        )
        + (
            "<p>Runs set aside and redone with their pair:</p><ul>"
            + "".join(f"<li>{e(x)}</li>" for x in rep.context.get("set_aside") or [])
            + "</ul>"
            if rep.context.get("set_aside")
            else ""
        )
        + f"<h2>Verdict lines</h2><pre>{lines}</pre>"
        + (f"<h2>Notes (written after the runs)</h2><pre class=notes>{e(notes.strip())}</pre>" if notes.strip() else "")
        + "</body></html>\n"
    )


def write_reproduction(rep: Reproduction, out_dir: Path) -> list[Path]:
    """OUT_DIR/seedNNN.md, .html and .json (each written whole, then renamed)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / rep.seed.stem
    paths = [stem.with_suffix(".md"), stem.with_suffix(".html"), stem.with_suffix(".json")]
    np = notes_path(out_dir, rep.seed.stem)
    notes = np.read_text() if np.exists() else ""
    write_text_atomic(paths[0], to_markdown(rep, notes))
    write_text_atomic(paths[1], to_html(rep, notes))
    write_text_atomic(paths[2], json_text(to_json(rep), indent=2, default=str) + "\n")
    return paths

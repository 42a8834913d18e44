"""What an A/B shows about NUMA balancing, in a few sentences computed from its comparison.

``numalab compare`` ends its table with this (text, markdown, HTML and JSON alike; ``make demo`` closes with
it). It reads the comparison's mechanism rows, which are what the kernel did whatever the VM:

* hint-fault locality (``vmstat.hint_local_pct``: the share of NUMA hint faults that were local; undefined
  on a side with no hint faults, e.g. balancing off);
* pages migrated (``vmstat.numa_pages_migrated``);
* the NUMA decisions that moved a task (``events.sched_move_numa``, ``events.sched_swap_numa``);

and says, for each, each side's mean and range and numalab's verdict on it, then which side balancing acted
on. Then where the workload's tasks ran, from the generic scheduler events (any scheduler: the placement rows,
``tasks.migrations_between_nodes`` and ``tasks.settled_s``). Where a side ran a sched_ext scheduler
(lab.analysis.scheduler_class), the BPF scheduler made that side's placement and NUMA balancing's scans ran only
for fair-class tasks: its rows are said to be the fair class's, and "balancing did nothing" is never said as a
verdict on the BPF scheduler. Then what the runs cannot show: where remote memory cost nothing
(lab.analysis.caveats: a row carries the caveat), the workload's own figure measures only what balancing
costs, not what locality buys, and the command that runs the modelled machine is named. Nothing here is written
in advance: a side that did not act, a row not measured, a verdict not judged are said as such.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field

from lab.analysis.caveats import FREE_REMOTE, modelled_command
from lab.analysis.compare import Comparison, Row, diff_text
from lab.analysis.display import percent
from lab.analysis.scheduler_class import fair_class_heading
from lab.analysis.stats import Stats
from lab.analysis.verdict import workload_figure
from lab.events import MOVE_NUMA, SWAP_NUMA
from lab.workloads.registry import WORKLOADS

LOCALITY = "vmstat.hint_local_pct"
HINT_FAULTS = "vmstat.numa_hint_faults"
MIGRATED = "vmstat.numa_pages_migrated"
MOVES = f"events.{MOVE_NUMA.name}"
SWAPS = f"events.{SWAP_NUMA.name}"
# (key, what it is in a sentence, unit: "%", "s" or a count a run)
MECHANISM = (
    (LOCALITY, "hint-fault locality", "%"),
    (MIGRATED, "pages migrated", "a run"),
    (MOVES, "NUMA task moves", "a run"),
    (SWAPS, "NUMA task swaps", "a run"),
)
# Where the tasks ran, from the generic scheduler events: any scheduler's (lab.analysis.residency).
PLACEMENT = (
    ("tasks.migrations_between_nodes", "task migrations between nodes", "a run"),
    ("tasks.settled_s", "time until the tasks that moved stayed on their final node", "s"),
)


@dataclass(frozen=True)
class Finding:
    """The mechanism rows said in words, who acted, and what the runs cannot show (None: nothing kept back)."""

    rows: list[dict] = field(default_factory=list)  # {"metric", "what", "baseline", "new", "verdict", "line"}
    placement: list[dict] = field(default_factory=list)  # the same, of the PLACEMENT rows
    fair_class: str = ""  # where a side ran a sched_ext scheduler: whose the mechanism rows are ("" in a fair A/B)
    acted: str = ""  # one sentence: on which side balancing acted, and how much
    cannot_show: str | None = None  # where remote memory cost nothing: what the workload's figure cannot mean
    workload_row: str | None = None  # the workload's figure in one line (its verdict, its caveat)


def _value(v: float, unit: str) -> str:
    if unit == "%":
        return f"{percent(v)}%"
    if unit == "s":
        return f"{v:.2f} s"
    return f"{v:,.0f}" if abs(v) >= 10 or v == int(v) else f"{v:.1f}"


def _side(row: Row | None, new: bool, unit: str) -> str | None:
    """A side's mean and range, e.g. "84.2% (80.1% to 88.9%, 3 runs)"; None without the row."""
    if row is None:
        return None
    s = row.new if new else row.base
    return _stats(s, row.mean(s), unit)


def _stats(s: Stats, mean: float, unit: str) -> str:
    shown = _value(mean, unit)
    return shown if s.min == s.max else f"{shown} ({_value(s.min, unit)} to {_value(s.max, unit)}, {s.n} runs)"


def _verdict(row: Row) -> str:
    """numalab's verdict on a row (its judgement's words, lab.analysis.judgement), "(significant)" after better,
    worse and changed, and its caveat where it has one."""
    j = row.judgement
    words = f"{j.text} (significant)" if j.word in ("better", "worse", "changed") else j.text
    return f"{words}; {row.caveat}" if row.caveat else words


def _undefined_side(c: Comparison, key: str) -> str | None:
    return next((side for k, side, _s in c.undefined if k == key), None)


def _defined_stats(c: Comparison, key: str) -> Stats | None:
    """The figures of the one side that has a metric defined on one side only."""
    return next((s for k, _side, s in c.undefined if k == key), None)


def _why_none(c: Comparison, new: bool) -> str:
    """Why a side has no hint-fault locality: no hint faults (balancing never sampled), or not measured."""
    faults = c.row(HINT_FAULTS)
    if faults is not None and (faults.new if new else faults.base).max == 0:
        return "none (no hint faults)"
    return "none (not measured)"


def mechanism_rows(c: Comparison, which: tuple = MECHANISM) -> list[dict]:
    """Each mechanism row of ``c`` in words (or each of ``which``); a row defined on one side only says which,
    and why."""
    out = []
    for key, what, unit in which:
        row, missing = c.row(key), _undefined_side(c, key)
        if row is None and missing is None:
            continue
        if row is not None:
            base, new, verdict = _side(row, False, unit), _side(row, True, unit), _verdict(row)
        else:
            s = _defined_stats(c, key)
            there = _stats(s, s.amean, unit) if s is not None else "defined"
            base = _why_none(c, False) if missing == "baseline" else there
            new = _why_none(c, True) if missing == "new" else there
            verdict = "n/a: undefined on one side, no verdict"
        per = "" if unit in ("%", "s") else f" {unit}"
        line = f"{what}{per}: {c.base_label} {base}, {c.new_label} {new}; numalab: {verdict}"
        out.append({"metric": key, "what": what, "baseline": base, "new": new, "verdict": verdict, "line": line})
    return out


def _acted(row: Row | None, new: bool) -> float:
    if row is None:
        return 0.0
    return row.mean(row.new if new else row.base)


def _did(c: Comparison, new: bool) -> bool:
    return any(_acted(c.row(k), new) > 0 for k in (HINT_FAULTS, MIGRATED, MOVES, SWAPS))


def acted_sentence(c: Comparison) -> str:
    """On which side NUMA balancing acted (hint faults, pages migrated, task moves and swaps), by the means; where
    a side ran a sched_ext scheduler, :func:`ext_sentence`."""
    if c.ext:
        return ext_sentence(c)
    a, b = _did(c, False), _did(c, True)
    if not (a or b):
        return "NUMA balancing did nothing measurable on either side: no hint faults, no pages migrated, no task moved."
    if a and b:
        return both_sides_sentence(c)
    acting, idle = (c.new_label, c.base_label) if b else (c.base_label, c.new_label)
    return f"With {acting}, NUMA balancing {_done(c, b)}; with {idle} it did none of this."


def ext_sentence(c: Comparison) -> str:
    """Where a side ran a sched_ext scheduler: the BPF scheduler made that side's placement, and NUMA balancing,
    which scans fair-class tasks only, is not a verdict on it; what balancing did on a fair-class side."""
    ext_sides = [(label, name) for label, name in zip((c.base_label, c.new_label), c.schedulers, strict=True)
                 if name != "fair"]  # fmt: skip
    named = " and ".join(c.ext)
    placed = any(c.row(k) is not None or _undefined_side(c, k) for k, _w, _u in PLACEMENT)
    where = (
        "the placement rows (from the generic scheduler events) say where the tasks ran"
        if placed
        else "these records have no placement rows (made before numalab read them): each run's residency in the "
        "report says where the tasks ran"
    )
    out = (
        f"With {' and '.join(label for label, _n in ext_sides)}, {named} (sched_ext) made the placement: NUMA "
        "balancing's scans run only for fair-class tasks, so its figures there are not a verdict on "
        f"{'them' if len(c.ext) > 1 else 'it'}; {where}."
    )
    if len(ext_sides) == 2:
        return out
    fair_new = c.schedulers[1] == "fair"
    fair = c.new_label if fair_new else c.base_label
    if _did(c, fair_new):
        return f"{out} With {fair}, NUMA balancing {_done(c, fair_new)}."
    return f"{out} With {fair}, NUMA balancing did nothing measurable."


def _done(c: Comparison, b: bool) -> str:
    """What balancing did on one side (``b``: the new side), in a clause."""
    pages = _acted(c.row(MIGRATED), b)
    tasks = _acted(c.row(MOVES), b) + _acted(c.row(SWAPS), b)
    loc = c.row(LOCALITY)
    local = _value(_acted(loc, b), "%") if loc is not None else None
    if local is None and _undefined_side(c, LOCALITY) == ("baseline" if b else "new"):
        s = _defined_stats(c, LOCALITY)
        local = _value(s.amean, "%") if s is not None else None
    what = [
        f"found {local} of its hint faults local" if local else None,
        f"migrated {_value(pages, 'a run')} pages a run" if c.row(MIGRATED) is not None else None,
        f"made {_value(tasks, 'a run')} NUMA task moves or swaps a run" if c.row(MOVES) or c.row(SWAPS) else None,
    ]
    return ", ".join(w for w in what if w) or "acted"


def both_sides_sentence(c: Comparison) -> str:
    """Where balancing acted on both sides: how their hint-fault locality compares, by numalab's verdict."""
    loc = c.row(LOCALITY)
    if loc is None:
        return f"NUMA balancing acted on both sides ({c.base_label}, {c.new_label}); neither had hint-fault locality."
    verdict = loc.verdict()
    how = {"better": "more local than", "worse": "less local than", "same": "as local as"}.get(verdict)
    said = f"{c.new_label}'s hint faults were {how} {c.base_label}'s" if how else "their hint-fault locality"
    judged = f"({_verdict(loc)})" if how else f"was not told apart: {_verdict(loc)}"
    return f"NUMA balancing acted on both sides; {said} {judged}."


def workload_line(c: Comparison) -> tuple[str | None, Row | None]:
    """The workload's own figure (the one ``run``, ``ab`` and ``bisect`` decide on: lab.analysis.verdict), its
    verdict and its caveat; another of its rows where that one was not measured."""
    load = WORKLOADS.get(c.workload)
    keys = [k for clock in ("host", "virtual") if load is not None and (k := workload_figure(load, clock))]
    rows = [r for r in c.rows if r.metric.key.startswith("workload.")]
    row = next((r for k in keys for r in rows if r.metric.key == k), rows[0] if rows else None)
    if row is None:
        return None, None
    diff = diff_text(row.mean(row.base), row.mean(row.new), row.metric.better)
    return f"{row.metric.key}: {diff} ({row.metric.better} is better); numalab: {_verdict(row)}", row


def finding(c: Comparison) -> Finding | None:
    """The finding of a comparison (None when it has no mechanism row: no vmstat, no trace)."""
    rows, placement = mechanism_rows(c), mechanism_rows(c, PLACEMENT)
    if not rows and not placement:
        return None
    line, wrow = workload_line(c)
    cannot = None
    if wrow is not None and wrow.caveat.startswith(FREE_REMOTE):  # (not the words naming the modelled machine)
        cannot = (
            f"What these runs cannot show: whether that locality makes {c.workload} faster. {wrow.caveat[0].upper()}"
            f"{wrow.caveat[1:]}, so {wrow.metric.key} measures only what balancing costs in this VM. The modelled "
            f"machine, where remote memory costs its SLIT ratio, shows it: {modelled_command(c.topology, c.workload)}."
        )
    for r in rows:
        r["fair_class_only"] = bool(c.ext)
    return Finding(rows, placement, fair_class_heading(c.ext), acted_sentence(c), cannot, line)


def to_text(c: Comparison) -> str:
    """The finding as the lines under compare's table ("" with none)."""
    f = finding(c)
    if f is None:
        return ""
    out = ["", "finding (the mechanism: what the kernel did, whatever the VM):"]
    out += [f"  {f.fair_class}."] if f.fair_class else []
    out += [f"  {r['line']}" for r in f.rows]
    out += [f"  where the tasks ran (any scheduler): {r['line']}" for r in f.placement]
    out.append(f"  {f.acted}")
    if f.workload_row:
        out.append(f"  the workload's figure: {f.workload_row}")
    if f.cannot_show:
        out.append(f"  {f.cannot_show}")
    return "\n".join(out) + "\n"


def to_markdown(c: Comparison) -> str:
    f = finding(c)
    if f is None:
        return ""
    lines = ["", "**Finding** (the mechanism: what the kernel did, whatever the VM):", ""]
    lines += [f"{f.fair_class}.", ""] if f.fair_class else []
    lines += [f"- {r['line']}" for r in f.rows]
    lines += [f"- where the tasks ran (any scheduler): {r['line']}" for r in f.placement]
    lines += ["", f.acted]
    if f.workload_row:
        lines += ["", f"The workload's figure: {f.workload_row}"]
    if f.cannot_show:
        lines += ["", f"> {f.cannot_show}"]
    return "\n".join(lines) + "\n"


def to_html(c: Comparison) -> str:
    f = finding(c)
    if f is None:
        return ""
    e = html.escape
    items = "".join(f"<li>{e(r['line'])}</li>" for r in f.rows)
    items += "".join(f"<li>where the tasks ran (any scheduler): {e(r['line'])}</li>" for r in f.placement)
    fair = f"<p>{e(f.fair_class)}.</p>" if f.fair_class else ""
    work = f"<p>The workload's figure: {e(f.workload_row)}</p>" if f.workload_row else ""
    cannot = f'<p class="note caveat">{e(f.cannot_show)}</p>' if f.cannot_show else ""
    return (
        f'<div class="finding"><h4>Finding</h4><p class="muted">The mechanism: what the kernel did, whatever the '
        f"VM.</p>{fair}<ul>{items}</ul><p>{e(f.acted)}</p>{work}{cannot}</div>"
    )


def to_dict(c: Comparison) -> dict | None:
    f = finding(c)
    if f is None:
        return None
    return {
        "mechanism": f.rows,
        "placement": f.placement,
        "fair_class": f.fair_class or None,
        "acted": f.acted,
        "workload": f.workload_row,
        "cannot_show": f.cannot_show,
        "free_remote_memory": bool(f.cannot_show),
        "free_remote_text": FREE_REMOTE if f.cannot_show else None,
    }

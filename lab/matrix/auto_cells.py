"""``repeats: auto`` in a matrix: more repeats only where a comparison is still undecided.

A comparison is a cell (topology, workload and the axis that is not the
baseline's) with its sides (the kernels, or the settings). The matrix runs
its ``auto.min_pairs`` repeats first; then, round after round, every cell whose
``auto.decide`` metrics are not all decided (better, worse or changed: significant by at
least the minimum effect; or "same within ±X%": the equivalence test at the minimum effect
shows it, lab.analysis.judgement) gets one more repeat of each
side (interleaved, A B), until they are, ``auto.max_pairs`` repeats are spent or
the time budget is. ``decide``'s "workload" (the default) is each cell's
workload's own figure. Each cell's stop reason and verdicts are returned (and
written to ``auto.json`` by the caller). Running again resumes: the rounds
are recomputed from the run records already there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from lab.analysis.ab_plan import WORKLOAD_FIGURE
from lab.analysis.record import load_manifest
from lab.analysis.verdict import Stop, Verdict, cell_label, resolve_decide, should_stop, verdicts_of
from lab.matrix.definition import MatrixRun, MatrixSpec
from lab.matrix.schedule import MatrixOutcome, Packing, execute_matrix, run_dir
from lab.paths import json_text, write_text_atomic
from lab.record_files import DMESG_BOOT, MANIFEST
from lab.vm.tcg.tcg_clock import clock_problem
from lab.workloads.user_workload import resolve_workload
from lab.workloads.workload_type import Workload


@dataclass
class CellResult:
    key: str  # e.g. "ring-4/pairs/default"
    sides: list[str]  # baseline first
    pairs: int
    stop: Stop
    verdicts: dict[str, list[Verdict]]  # per non-baseline side

    def to_dict(self) -> dict:
        return {
            "cell": self.key,
            "sides": self.sides,
            "repeats": self.pairs,
            "stopped": self.stop.reason,
            "detail": self.stop.detail,
            "verdicts": {k: [v.to_dict() for v in vs] for k, vs in self.verdicts.items()},
        }


@dataclass
class AutoOutcome:
    runs: list[MatrixRun]
    cells: list[CellResult]
    outcomes: list[MatrixOutcome] = field(default_factory=list)

    @property
    def interrupted(self) -> bool:
        return any(o.interrupted for o in self.outcomes)


def _side_axis(spec: MatrixSpec) -> str:
    return next(iter(spec.baseline))  # "kernel" or "setting"


def cell_key(spec: MatrixSpec, run: MatrixRun) -> str:
    other = run.setting.name if _side_axis(spec) == "kernel" else run.kernel.name
    return cell_label(run.topology.label, run.workload.name, other)


def side_of(spec: MatrixSpec, run: MatrixRun) -> str:
    return run.kernel.name if _side_axis(spec) == "kernel" else run.setting.name


def with_repeat(run: MatrixRun, repeat: int) -> MatrixRun:
    t, k, w, s = run.topology, run.kernel, run.workload, run.setting
    return MatrixRun(f"{t.label}.{k.name}.{w.name}.{s.name}.r{repeat}", t, k, w, s, repeat)


def _manifest(out: Path, run: MatrixRun) -> dict | None:
    """The run's manifest, or None if it has none or its guest clock ran at the wrong rate (then its
    figures are not comparable: a "15 s" workload ran for a fraction of that; lab.vm.tcg.tcg_clock)."""
    mf = run_dir(out, run) / MANIFEST
    if not mf.exists():
        return None
    return None if clock_problem_of(out, run) else load_manifest(mf)


def clock_problem_of(out: Path, run: MatrixRun) -> str | None:
    dmesg = run_dir(out, run) / DMESG_BOOT
    return clock_problem(dmesg.read_text(errors="replace")) if dmesg.exists() else None


@cache
def _workload(spec: str) -> Workload:
    return resolve_workload(spec)


def cell_decide(decide: tuple[str, ...], runs: list[MatrixRun]) -> list[str]:
    """The plan's ``decide`` for one cell's runs: "workload" made the cell's workload's own figure
    (lab.analysis.verdict.workload_figure), as under the virtual clock when a side runs under it (there runs
    have no per-vCPU-second twins)."""
    if WORKLOAD_FIGURE not in decide:
        return list(decide)
    clock = "virtual" if any(r.setting.clock == "virtual" for r in runs) else "host"
    return resolve_decide(decide, _workload(runs[0].workload.spec), clock)


def judge_cell(spec: MatrixSpec, out: Path, runs: list[MatrixRun], elapsed_s: float, round_s: float | None,
               min_effect: float | None = None, include_statuses: tuple[str, ...] = ()) -> CellResult:  # fmt: skip
    """Verdicts and the stop decision for one cell's runs so far; ``min_effect`` (percent, --min-effect)
    overrides the spec's ``auto.min_effect``, which overrides each metric's own (lab.min_effect); the runs of
    ``include_statuses`` count besides the ok ones (--include-status; each verdict line names them)."""
    auto = spec.auto
    assert auto is not None
    plan = auto if min_effect is None else replace(auto, min_effect=min_effect)  # (the verdicts' reading)
    base_name = next(iter(spec.baseline.values()))
    by_side: dict[str, list[dict]] = {}
    for r in runs:
        m = _manifest(out, r)
        by_side.setdefault(side_of(spec, r), [])
        if m is not None:
            by_side[side_of(spec, r)].append(m)
    sides = [base_name] + [s for s in by_side if s != base_name]
    pairs = max((r.repeat for r in runs), default=0)
    key = cell_key(spec, runs[0])
    verdicts = {
        s: verdicts_of(
            by_side.get(base_name, []),
            by_side[s],
            cell_decide(auto.decide, runs),
            plan,
            (base_name, s),
            key,
            ("ok", *include_statuses),
        )  # fmt: skip
        for s in sides[1:]
    }
    flat = [v for vs in verdicts.values() for v in vs]
    stop = should_stop(flat, pairs, auto, elapsed_s, round_s)
    return CellResult(key, sides, pairs, stop, verdicts)


def run_auto_matrix(
    spec: MatrixSpec,
    out: Path,
    kernel_args: dict[str, str],
    progress: Callable[[str], None],
    min_effect: float | None = None,
    include_statuses: tuple[str, ...] = (),
    packing: Packing | None = None,
) -> AutoOutcome:
    """Run the spec's runs, then more repeats of the undecided cells; returns every run and each cell's verdict
    (``min_effect``: --min-effect; ``include_statuses``: --include-status; :func:`judge_cell`; ``packing``: how
    the runs share the host, lab.matrix.schedule.Packing)."""
    assert spec.auto is not None
    runs = list(spec.runs)
    outcome = AutoOutcome(runs, [])
    t0 = time.monotonic()
    round_s: float | None = None
    while True:
        r0 = time.monotonic()
        res = execute_matrix(spec, runs, out, kernel_args, packing=packing or Packing(), progress=progress)
        outcome.outcomes.append(res)
        if res.interrupted:
            break
        ran = [x for x in res.results if not x.resumed]
        if ran:
            round_s = time.monotonic() - r0
        cells: dict[str, list[MatrixRun]] = {}
        for r in runs:
            cells.setdefault(cell_key(spec, r), []).append(r)
        results = [judge_cell(spec, out, rs, time.monotonic() - t0, round_s, min_effect, include_statuses)
                   for rs in cells.values()]  # fmt: skip
        outcome.cells = results
        more: list[MatrixRun] = []
        for c in results:
            if c.stop.stop:
                continue
            last = [r for r in cells[c.key] if r.repeat == c.pairs]
            more += [with_repeat(r, c.pairs + 1) for r in last]
            progress(f"auto: {c.key}: {c.stop.detail}; adding repeat {c.pairs + 1}")
        if not more:
            break
        runs = runs + more
        outcome.runs = runs
    for c in outcome.cells:
        progress(f"auto: {c.key}: stopped ({c.stop.reason}): {c.stop.detail}")
    return outcome


def merged(outcome: AutoOutcome) -> MatrixOutcome:
    """One MatrixOutcome for the summary: the last round's results (it saw every run), all rounds' time."""
    last = outcome.outcomes[-1]
    runs_new = {r.id: r for o in outcome.outcomes for r in o.results if not r.resumed}
    results = [runs_new.get(r.id, r) for r in last.results]
    return MatrixOutcome(results, sum(o.wall_s for o in outcome.outcomes), sum(o.cpu_s for o in outcome.outcomes),
                         last.cores, outcome.interrupted)  # fmt: skip


def write_auto_json(out: Path, outcome: AutoOutcome) -> Path:
    path = out / "auto.json"
    write_text_atomic(path, json_text({"cells": [c.to_dict() for c in outcome.cells]}, indent=2) + "\n")
    return path

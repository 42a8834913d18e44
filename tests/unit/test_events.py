"""One vocabulary of trace events (lab.events), and a default trace set that follows the analyses.

The events a run traces by default are derived from the analyses that need them
(lab.analysis.numa.default_events); the run's guest settings and ``numalab run --help``
take them from there, so an analysis whose ``requires`` changes changes what a
run records. And no module of lab/ spells an event's name itself.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import replace

from common import REPO

from lab.analysis import numa
from lab.analysis.numa import ANALYSES, Analysis, analyse_trace, default_events
from lab.cli.main import build_parser, run_options_from_args
from lab.events import BY_NAME, KNOWN, MIGRATE_PAGES, MIGRATE_TASK, NUMA_DECISIONS, STICK_NUMA
from lab.report import perfetto
from lab.run.batch import settings_of
from lab.topology.model.spec import load_topology
from lab.trace.tracedat import TraceData
from lab.workloads.registry import get_workload

DATA = REPO / "tests" / "data" / "runs"


def _settings(*extra: str):
    args = build_parser().parse_args(["run", "--topology", "ring-4", "--workload", "numa01", *extra])
    return settings_of(run_options_from_args(args), get_workload("numa01"), load_topology("ring-4"))


def _run_help() -> str:
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    return " ".join(sub.choices["run"].format_help().split())


def test_the_default_set_is_what_the_default_analyses_require() -> None:
    derived = default_events()
    required = {e for a in ANALYSES if a.default for e in (*a.requires, *a.optional)}
    assert set(derived) == required and len(derived) == len(required)
    # sched_migrate_task (every task migration) is traced by default since issue 37: the residency needs it
    assert MIGRATE_TASK in derived and any(MIGRATE_TASK in a.requires and a.name == "residency" for a in ANALYSES)


def test_the_default_set_is_the_one_numalab_has_always_traced() -> None:
    """The derivation changes nothing for the events recorded runs traced: the same, in the same order, first;
    issue 37's residency adds sched_migrate_task, sched_wakeup_new and sched_process_exit after them."""
    recorded = json.loads((DATA / "ring4-numa01-on-1" / "manifest.json").read_text())["settings"]["trace_events"]
    assert [e.full for e in default_events()][: len(recorded)] == recorded
    assert recorded == ["sched:sched_move_numa", "sched:sched_swap_numa", "sched:sched_stick_numa",
                        "migrate:mm_migrate_pages"]  # fmt: skip
    assert [e.full for e in default_events()][len(recorded) :] == [
        "sched:sched_migrate_task", "sched:sched_wakeup_new", "sched:sched_process_exit"]  # fmt: skip


def test_a_run_traces_every_event_its_default_analyses_need() -> None:
    """The settings of ``numalab run`` (and so of every matrix run) and the --help text take the derived set: every
    default analysis runs on a default trace, and an opt-in one not asked for is neither run nor skipped. A
    default set written out anywhere instead would fall behind an analysis whose requires changed, and fail
    here."""
    settings = _settings()
    assert settings.trace_events == tuple(e.full for e in default_events())
    recorded = {e.split(":")[1] for e in settings.trace_events}
    out = analyse_trace(TraceData([]), load_topology("ring-4"), recorded, 0.0)
    assert out["skipped"] == {}  # (an opt-in analysis whose events were not asked for is not "skipped")
    assert not any(a.name in out for a in ANALYSES if not a.default)
    assert f"default set: {', '.join(settings.trace_events)})" in _run_help()


def test_the_perfetto_timeline_has_its_events_in_a_default_trace() -> None:
    """The Perfetto export decodes events too (lab.report.perfetto.REQUIRES): a default run traces them all."""
    assert set(perfetto.REQUIRES) <= set(default_events())


def test_extra_events_come_after_the_default_set_once_and_no_trace_traces_nothing() -> None:
    settings = _settings("--event", "sched:sched_switch", "--event", STICK_NUMA.full, "--event", "sched:sched_switch")
    assert settings.trace_events == (*(e.full for e in default_events()), "sched:sched_switch")
    assert _settings("--event", MIGRATE_TASK.full).trace_events == tuple(e.full for e in default_events())  # once
    assert _settings("--no-trace").trace_events == ()


def test_the_derivation_follows_a_changed_analysis() -> None:
    """Change an analysis's requires, or its default mark, and the default set follows."""
    res = next(a for a in ANALYSES if a.name == "residency")
    lb = next(a for a in ANALYSES if a.name == "cross_node_lb")
    llc = next(a for a in ANALYSES if a.name == "llc")  # (the residency's events, by LLC)
    opt_in = tuple(replace(a, default=False) if a in (res, lb, llc) else a for a in ANALYSES)
    assert default_events(opt_in) == (*NUMA_DECISIONS, MIGRATE_PAGES)
    without_migrate = tuple(a for a in opt_in if MIGRATE_PAGES not in a.requires)
    assert default_events(without_migrate) == NUMA_DECISIONS
    sticks_only = (Analysis("sticks", (STICK_NUMA,), numa.stick_reasons),)
    assert default_events(sticks_only) == (STICK_NUMA,)


def test_the_vocabulary_names_each_event_once() -> None:
    assert len({e.name for e in KNOWN}) == len({e.full for e in KNOWN}) == len({e.short for e in KNOWN}) == len(KNOWN)
    assert all(BY_NAME[e.name] is e and e.full == f"{e.system}:{e.name}" == str(e) for e in KNOWN)
    assert {e for a in ANALYSES for e in a.requires} <= set(KNOWN)


# --- no event name spelled outside lab/events.py -----------------------------------------------------

EVENT_WORD = re.compile(r"(?<!\w)(" + "|".join(re.escape(e.name) for e in KNOWN) + r")(?!\w)")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of a module, its classes and functions (prose may name events)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def event_literals(source: str) -> list[str]:
    """Every string literal of a Python source (f-string parts too, docstrings not) naming a known event."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return [
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        and EVENT_WORD.search(node.value)
    ]  # fmt: skip


def test_every_event_name_in_lab_comes_from_lab_events() -> None:
    found = {}
    for path in sorted((REPO / "lab").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        if rel == "lab/events.py":
            continue
        if hits := event_literals(path.read_text()):
            found[rel] = hits
    assert found == {}, f"event names spelled outside lab/events.py: {found}"


def test_the_check_sees_an_event_name_in_code_but_not_in_a_docstring() -> None:
    """The test above can fail: literals in code, in f-strings and in system:name form are caught."""
    source = '''
"""Counts sched_move_numa events."""
def f(kind):
    """Reads mm_migrate_pages."""
    a = trace.named("sched_swap_numa")
    b = f"events.sched_stick_numa {kind}"
    return "sched:sched_migrate_task", "migrate_pages", "sched_move_numa_x"
'''
    assert sorted(event_literals(source)) == ["events.sched_stick_numa ", "sched:sched_migrate_task", "sched_swap_numa"]

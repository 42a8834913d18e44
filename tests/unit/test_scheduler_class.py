"""The scheduler a run ran under (lab.analysis.scheduler_class, issue 51): the run record's ``scheduler`` read in
one place, and what it changes downstream: compare's labels name the schedulers, an A/B of two schedulers on one
kernel is not "a kernel compared with itself", NUMA balancing's rows are marked as the fair class's in every
rendering (text, markdown, HTML, JSON) and in the finding, and the report groups runs by scheduler. On copies of
the checked-in ring-4 numa01 records (balancing on), one side said to have run under scx_simple."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab
from test_analysis import ON

from lab.analysis import compare as cmp
from lab.analysis import finding
from lab.analysis.record import RunRecord
from lab.analysis.scheduler_class import SchedulerInfo, ext_names, scheduler_of, side_schedulers
from lab.errors import LabError
from lab.report import ab_table

SCX = {"asked": "scx_simple", "kind": "sched_ext", "start": {"state": "enabled", "ops": "simple"},
       "end": {"state": "enabled", "ops": "simple"}, "ejected": False, "reason": None}  # fmt: skip
FAIR = {"asked": "fair", "kind": "fair", "start": {"state": "disabled", "ops": None}, "end": None, "ejected": False}


def test_a_record_without_the_field_is_a_fair_class_run() -> None:
    info = scheduler_of({"run_id": "x"})
    assert info == SchedulerInfo() and info.name == "fair" and not info.is_ext and not info.recorded
    assert scheduler_of({"scheduler": FAIR}).name == "fair" and scheduler_of({"scheduler": FAIR}).recorded


def test_a_sched_ext_run_is_named_by_what_was_asked() -> None:
    info = scheduler_of({"scheduler": SCX})
    assert info.is_ext and info.name == info.label == "scx_simple" and info.start_ops == info.end_ops == "simple"
    user = scheduler_of({"scheduler": SCX | {"asked": "/home/me/scx/target/release/scx_rusty"}})
    assert user.name == "scx_rusty"
    gone = scheduler_of({"scheduler": SCX | {"ejected": True, "reason": "runnable task stall", "end": None}})
    assert gone.label == "scx_simple (ejected)" and gone.reason == "runnable task stall" and gone.end_ops is None
    assert ext_names([{}, {"scheduler": SCX}, {"scheduler": SCX}]) == ["scx_simple"]
    # a sched_ext record that does not say what was asked is named by its ops, never "fair"
    unnamed = {k: v for k, v in SCX.items() if k != "asked"}
    assert scheduler_of({"scheduler": unnamed}).name == "simple"
    assert scheduler_of({"scheduler": {"kind": "sched_ext"}}).name == "sched_ext"
    assert side_schedulers([{}, {"scheduler": SCX}]) == "fair+scx_simple" and side_schedulers([]) == "fair"


@pytest.mark.parametrize(
    ("field", "words"),
    [
        ("scx_simple", "scheduler: not a mapping"),
        (SCX | {"kind": "bpf"}, "scheduler.kind: 'bpf' is not one of fair, sched_ext"),
        (SCX | {"asked": 3}, "scheduler.asked: not a name"),
        (SCX | {"ejected": "no"}, "scheduler.ejected: not true or false"),
        (SCX | {"start": ["simple"]}, "scheduler.start: not a mapping"),
        (SCX | {"end": {"ops": 7}}, "scheduler.end.ops: not a name"),
        (SCX | {"reason": {"x": 1}}, "scheduler.reason: not a text"),
    ],
)
def test_a_field_not_as_documented_is_a_one_line_error(field: object, words: str) -> None:
    with pytest.raises(LabError, match="^" + words.replace(".", r"\.").replace("(", r"\(")):
        scheduler_of({"scheduler": field})


def _copies(tmp_path: Path, scheduler: dict | None, name: str, runs: list[Path] = ON) -> list[Path]:
    """The balancing-on records (or ``runs``), copied, each with ``scheduler`` in its manifest (None: as
    recorded)."""
    out = []
    for i, src in enumerate(runs):
        dst = tmp_path / f"{name}{i + 1}"
        shutil.copytree(src, dst)
        mf = dst / "manifest.json"
        m = json.loads(mf.read_text())
        if scheduler is not None:
            m["scheduler"] = scheduler
        m["run_id"] = f"{m['run_id']}-{name}"
        mf.write_text(json.dumps(m))
        out.append(dst)
    return out


def test_a_bad_field_is_named_with_its_record(tmp_path: Path) -> None:
    (bad,) = _copies(tmp_path, SCX | {"kind": "bpf"}, "bad")[:1]
    with pytest.raises(LabError, match=r"manifest\.json: scheduler\.kind"):
        RunRecord.load(bad)
    assert_one_line_error(numalab("compare", "--baseline", str(bad), "--new", str(bad)), "scheduler.kind")


def _ab(tmp_path: Path) -> cmp.Comparison:
    base = [RunRecord.load(p) for p in _copies(tmp_path, None, "fair")]
    new = [RunRecord.load(p) for p in _copies(tmp_path, SCX, "scx")]
    return cmp.compare_runs(base, new)


def test_fair_against_sched_ext_on_one_kernel(tmp_path: Path) -> None:
    c = _ab(tmp_path)
    # the labels name the schedulers; one kernel under two schedulers is an A/B of the schedulers, not a kernel
    # compared with itself
    assert (c.base_label, c.new_label) == ("stock [fair]", "stock [scx_simple]")
    assert not c.same_kernel and not c.warnings and c.schedulers == ("fair", "scx_simple") and c.ext == ["scx_simple"]
    # NUMA balancing's rows carry the mark, the others do not
    marked = {r.metric.key for r in c.rows if r.class_note}
    assert {"vmstat.numa_hint_faults", "vmstat.hint_local_pct", "vmstat.numa_pages_migrated",
            "events.sched_move_numa", "events.sched_swap_numa", "events.sched_stick_numa"} <= marked  # fmt: skip
    assert not any(k.startswith(("workload.", "timings.")) or k == "tasks.pingpong" for k in marked)
    row = c.row("vmstat.numa_pages_migrated")
    assert "the fair class's" in row.verdict_text() and "scx_simple (sched_ext)" in row.verdict_text()
    # in every rendering
    text = ab_table.to_text(c)
    assert next(ln for ln in text.splitlines() if ln.startswith("Amean    vmstat.numa_pages_migrated")).endswith(
        row.class_note
    )
    assert any("(sched_ext) ran the workload on a side" in n for n in c.notes)
    md = next(ln for ln in ab_table.to_markdown(c).splitlines() if ln.startswith("| vmstat.numa_pages_migrated |"))
    assert "the fair class's" in md
    assert "the fair class&#x27;s" in ab_table.to_html(c)
    d = ab_table.to_dict(c)
    rows = {m["metric"]: m for m in d["metrics"]}
    assert rows["vmstat.numa_pages_migrated"]["fair_class_only"] and not rows["timings.boot_s"]["fair_class_only"]
    assert d["schedulers"] == {"baseline": "fair", "new": "scx_simple", "sched_ext": ["scx_simple"]}


def test_a_fair_class_ab_is_as_it_was(tmp_path: Path) -> None:
    """Records without the field (every record made before) and records that say fair: no mark, no scheduler in
    the labels, and one kernel with one scheduler is still a kernel compared with itself."""
    for field in (None, FAIR):
        base, new = ([RunRecord.load(p) for p in _copies(tmp_path / f"{field is None}{s}", field, s)] for s in "ab")
        c = cmp.compare_runs(base, new)
        assert c.base_label == "stock" and not c.ext and not any(r.class_note for r in c.rows)
        assert c.same_kernel and "the fair class's" not in ab_table.to_text(c) + finding.to_text(c)
        assert ab_table.to_dict(c)["schedulers"]["sched_ext"] == []


def test_the_finding_never_calls_balancing_idle_a_verdict_on_the_bpf_scheduler(tmp_path: Path) -> None:
    c = _ab(tmp_path)
    f = finding.finding(c)
    assert f is not None and f.fair_class.startswith("NUMA balancing's rows are the fair class's")
    assert f.acted.startswith("With stock [scx_simple], scx_simple (sched_ext) made the placement")
    assert "did nothing" not in f.acted.split("With stock [fair]")[0]
    assert "With stock [fair], NUMA balancing found" in f.acted  # the fair side's balancing did act
    assert all(r["fair_class_only"] for r in f.rows)
    for text in (finding.to_text(c), finding.to_markdown(c)):
        assert f.fair_class in text and f.acted in text
    d = finding.to_dict(c)
    assert d["fair_class"] == f.fair_class and "placement" in d
    # sched_ext on both sides (two BPF schedulers, or one on two kernels): nothing said of balancing's idleness
    both = cmp.compare_runs(*([RunRecord.load(p) for p in _copies(tmp_path / s, SCX, s)] for s in ("x", "y")))
    fb = finding.finding(both)
    assert fb is not None and "did nothing" not in fb.acted and "these records have no placement rows" in fb.acted
    assert (both.base_label, both.new_label) == ("stock [scx_simple]", "stock [scx_simple]")


def test_the_report_groups_runs_by_scheduler(tmp_path: Path) -> None:
    from lab.report.report_model import build_report

    runs = _copies(tmp_path, None, "fair") + _copies(tmp_path, SCX, "scx")
    report = build_report(runs, tmp_path / "out" / "report.html").data
    assert [g["label"] for g in report["groups"]] == ["stock scheduler=fair", "stock scheduler=scx_simple"]
    (comp,) = report["comparisons"]
    assert comp["schedulers"]["sched_ext"] == ["scx_simple"] and comp["finding"]["fair_class"]
    by = {r["run_id"].rsplit("-", 1)[1]: r for r in report["runs"]}
    assert by["scx"]["scheduler"]["kind"] == "sched_ext" and by["scx"]["group"] == "stock scheduler=scx_simple"
    page = (tmp_path / "out" / "report.html").read_text()
    assert "scx_simple (sched_ext) placed this run" in page


def test_verdict_lines_and_dot_plots_say_it(tmp_path: Path) -> None:
    """`ab`, `run --repeat auto`, bisect and the matrix decide from verdict lines, and the report draws a dot plot a
    row: NUMA balancing's carry the mark there too, the placement rows do not."""
    from lab.analysis.verdict import verdicts_of
    from lab.report.sections.ab_section import _verdict_text

    base = [json.loads((p / "manifest.json").read_text()) for p in _copies(tmp_path, None, "fair")]
    new = [json.loads((p / "manifest.json").read_text()) for p in _copies(tmp_path, SCX, "scx")]
    migrated, boot = verdicts_of(base, new, ["vmstat.numa_pages_migrated", "timings.boot_s"])
    assert migrated.line().endswith("so this row is not a verdict on it") and "the fair class's" in migrated.line()
    assert "fair class" not in boot.line()
    assert "fair class" not in "".join(v.line() for v in verdicts_of(base, base, ["vmstat.numa_pages_migrated"]))
    c = _ab(tmp_path / "ab")
    assert "the fair class&#x27;s" in _verdict_text(c.row("vmstat.numa_pages_migrated"))
    assert "fair class" not in _verdict_text(c.row("timings.boot_s"))


def test_the_finding_gives_the_placement_rows_of_a_real_run(tmp_path: Path) -> None:
    """On the real balancing-off record (its manifest has the placement figures), under the fair class and said to
    have run under scx_simple: the finding gives its migrations between nodes and its settling time, any
    scheduler's, without the fair-class mark; and the fair side's idle balancing is said of the fair side only."""
    real = [Path(__file__).parent.parent / "data" / "runs" / "ring4x1-numa01-off"]
    base = [RunRecord.load(p) for p in _copies(tmp_path, None, "fair", real)]
    new = [RunRecord.load(p) for p in _copies(tmp_path, SCX, "scx", real)]
    c = cmp.compare_runs(base, new)
    f = finding.finding(c)
    assert f is not None
    by = {r["metric"]: r for r in f.placement}
    assert by["tasks.migrations_between_nodes"]["baseline"] == by["tasks.migrations_between_nodes"]["new"] == "7"
    assert by["tasks.settled_s"]["new"] == "6.45 s" and "fair class" not in by["tasks.settled_s"]["line"]
    assert not c.row("tasks.settled_s").class_note and c.row("vmstat.numa_hint_faults").class_note
    assert "the placement rows (from the generic scheduler events) say where the tasks ran" in f.acted
    assert f.acted.endswith("With stock [fair] (balancing off), NUMA balancing did nothing measurable.")
    assert "where the tasks ran (any scheduler): time until the tasks that moved" in finding.to_text(c)


def test_no_balancing_activity_under_sched_ext_is_expected() -> None:
    """A run with balancing on and nothing from it: a warning under the fair class, expected under a sched_ext
    scheduler (balancing scans fair-class tasks only)."""
    from lab.report.sections.numa_section import _quiet_box

    on = {"settings": {"numa_balancing": "1"}}
    assert "unexpected with NUMA balancing on" in _quiet_box(on)
    ext = _quiet_box(on | {"scheduler": {"kind": "sched_ext", "name": "scx_simple"}})
    assert "expected: scx_simple (sched_ext) ran the tasks" in ext and "unexpected" not in ext

"""What numalab reads of a kernel, checked per booted kernel: the fields of the NUMA trace events (against the
formats trace.dat carries) and the /proc/vmstat counters. A field or counter the kernel does not have is a note
in the run record, and what it feeds is left out: never a crash, never silent zeros."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lab.analysis import metrics as metrics_mod
from lab.analysis.metrics import run_metrics, vmstat_notes
from lab.analysis.mmtests import VMSTAT_NUMA_KEYS
from lab.analysis.numa import ANALYSES, analyse_trace, format_notes
from lab.analysis.record import RunRecord
from lab.events import KNOWN, MIGRATE_PAGES, MOVE_NUMA
from lab.trace import tracedat
from lab.trace.tracedat import read_formats, read_trace

DATA = Path(__file__).resolve().parents[1] / "data" / "runs"
FULL = DATA / "ring4-numa01-on-1"  # trace-cmd record: every event's format (6.1)
RAW = DATA / "ring2-idle"  # raw mode: the enabled events' formats only


def test_trace_dat_carries_the_formats_of_the_booted_kernel() -> None:
    formats = read_formats(FULL / "trace.dat")
    assert len(formats) > 500
    # the names trace-cmd report prints: mm_migrate_pages' field "succeeded" prints as nr_succeeded
    assert {"nr_succeeded", "nr_thp_split", "reason"} <= formats["mm_migrate_pages"]
    assert formats["sched_move_numa"] == {"pid", "tgid", "ngid", "src_cpu", "src_nid", "dst_cpu", "dst_nid"}
    raw = read_formats(RAW / "trace.dat")
    assert {"sched_move_numa", "sched_swap_numa", "sched_stick_numa", "mm_migrate_pages"} <= set(raw)
    assert read_trace(RAW / "trace.dat").formats == raw


def test_every_field_numalab_reads_is_in_61s_formats() -> None:
    formats = read_formats(FULL / "trace.dat")
    for e in KNOWN:
        assert set(e.reads) <= formats[e.name], (e.name, set(e.reads) - formats[e.name])
    assert format_notes(formats, {e.name for e in KNOWN}) == []


def test_each_analysis_declares_fields_its_events_have() -> None:
    for a in ANALYSES:
        reads = {f for e in a.requires for f in e.reads}
        assert set(a.fields) <= reads, (a.name, set(a.fields) - reads)


def test_a_renamed_field_skips_what_reads_it_and_says_so(monkeypatch) -> None:
    real = read_formats(FULL / "trace.dat")
    renamed = dict(real) | {
        "sched_move_numa": (real["sched_move_numa"] - {"src_nid", "dst_nid"}) | {"src_node", "dst_node"},
        "mm_migrate_pages": real["mm_migrate_pages"] - {"nr_thp_split"},
    }
    monkeypatch.setattr(tracedat, "read_formats", lambda path: renamed)
    r = RunRecord.load(FULL)
    m = run_metrics(r.path, r.topology, tuple(r.manifest["settings"]["trace_events"]), r.workload_start_uptime)
    skipped = m["numa"]["skipped"]
    assert skipped["node_moves"] == "sched_move_numa has no src_nid, dst_nid in this kernel's format"
    assert skipped["migrate_pages"] == "mm_migrate_pages has no nr_thp_split in this kernel's format"
    assert "node_moves" not in m["numa"] and "per_task" in m["numa"] and "rates" in m["numa"]
    notes = m["interface_notes"]
    assert notes[0].startswith(f"trace event {MOVE_NUMA.full}: this kernel's format has no src_nid, dst_nid (renamed")
    assert "src_node" in notes[0] and notes[0].endswith("node_moves left out, not counted as 0")
    assert notes[1].startswith(f"trace event {MIGRATE_PAGES.full}: this kernel's format has no nr_thp_split")
    assert m["events"]["sched_move_numa"] > 0  # counting needs no field: still counted


def test_a_hostile_format_makes_a_bounded_note() -> None:
    (note,) = format_notes(
        {"sched_move_numa": frozenset(f"f{i}" + "x" * 100 for i in range(5000))}, {"sched_move_numa"}
    )
    assert len(note) < 2500 and note.count("x" * 65) == 0 and "and 4976 more" in note


def test_an_event_without_a_format_and_unknown_formats() -> None:
    assert format_notes({"sched_swap_numa": frozenset()}, {"sched_move_numa"}) == [
        "trace event sched:sched_move_numa: trace.dat has no format for it (not in this kernel?)"
    ]
    assert format_notes({}, {"sched_move_numa"}) == []  # a trace-cmd that cannot list formats: nothing claimed


def test_unknown_formats_run_every_analysis(monkeypatch) -> None:
    monkeypatch.setattr(tracedat, "read_formats", lambda path: {})
    data = read_trace(FULL / "trace.dat", ("sched_move_numa",))
    r = RunRecord.load(FULL)
    out = analyse_trace(data, r.topology, {"sched_move_numa"}, 0.0)
    assert "node_moves" in out and "node_moves" not in out["skipped"]


def _copy(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(FULL, run)
    return run


def test_a_missing_vmstat_counter_is_a_note_and_left_out(tmp_path) -> None:
    run = _copy(tmp_path)
    for name in ("vmstat.start", "vmstat.end"):
        lines = (run / name).read_text().splitlines()
        (run / name).write_text("\n".join(ln for ln in lines if not ln.startswith("numa_pte_updates ")) + "\n")
    r = RunRecord.load(run)
    m = run_metrics(r.path, r.topology, (), r.workload_start_uptime)
    assert m["interface_notes"] == [
        "/proc/vmstat: this kernel has no numa_pte_updates (renamed, or not built in): left out, not counted as 0"
    ]
    assert "numa_pte_updates" not in m["vmstat"] and "numa_hint_faults" in m["vmstat"]
    assert "autonuma_cost" not in m["vmstat"] and "mmtests" not in m  # made of it: not made of a zero
    from lab.run.summary import print_summary

    manifest = json.loads((run / "manifest.json").read_text())
    manifest["metrics"] = m
    lines = []
    print_summary(manifest, out=type("W", (), {"write": lambda self, s: lines.append(s)})())
    assert "NOTE: /proc/vmstat: this kernel has no numa_pte_updates" in "".join(lines)


def test_a_complete_record_has_no_notes() -> None:
    r = RunRecord.load(FULL)
    m = run_metrics(r.path, r.topology, tuple(r.manifest["settings"]["trace_events"]), r.workload_start_uptime)
    assert "interface_notes" not in m and "autonuma_cost" in m["vmstat"] and m["mmtests"]
    start = metrics_mod.read_vmstat(FULL / "vmstat.start")
    assert set(VMSTAT_NUMA_KEYS) <= set(start)
    assert vmstat_notes(start, start) == []


@pytest.mark.parametrize("gone", [("numa_hint_faults", "numa_hint_faults_local")])
def test_vmstat_notes_name_every_missing_counter(gone) -> None:
    start = {k: 1 for k in VMSTAT_NUMA_KEYS if k not in gone}
    assert vmstat_notes(start, start) == [
        f"/proc/vmstat: this kernel has no {', '.join(gone)} (renamed, or not built in): left out, not counted as 0"
    ]

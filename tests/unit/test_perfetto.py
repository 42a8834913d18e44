"""The Perfetto / chrome://tracing export, on real traces from tests/data/runs.

Counts are checked against the real ``trace-cmd report`` output, parsed here
independently of lab.trace. Flow arrows are checked the way Perfetto's JSON
importer binds them: a v1 flow is keyed by (id, cat, name), its start binds to
the slice open on the source CPU's track and its end (``"bp": "e"``) to the
slice open on the destination CPU's track, so both tracks must carry an
instant at that timestamp.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from common import needs_setup_package

from lab.analysis.numa import NUMA_KINDS
from lab.analysis.record import RunRecord
from lab.report.perfetto import PID, perfetto_trace, trace_events
from lab.trace.tracedat import Event, TraceData

DATA = Path(__file__).resolve().parents[1] / "data" / "runs"


def _runs(kind: str) -> list[Path]:
    """The checked-in records with NUMA balancing on or off; missing ones fail (they are part of the repo)."""
    found = sorted(p for p in DATA.glob(f"ring4-numa01-{kind}-*") if (p / "trace.dat").exists())
    assert len(found) == 3, f"{DATA}: expected ring4-numa01-{kind}-{{1,2,3}} with trace.dat (see its README)"
    return found


ON, OFF = _runs("on"), _runs("off")
needs_trace_cmd = needs_setup_package(shutil.which("trace-cmd") is not None, "trace-cmd", "trace-cmd")
_LINE = re.compile(r"^\s*.*?-\d+\s+\[(\d+)\]\s+(?:\S+\s+)?(\d+\.\d+):\s+(\w+):\s*(.*)$")


def report_events(trace: Path) -> list[tuple[int, float, str, dict]]:
    """(cpu, ts, name, fields) of the NUMA events, straight from trace-cmd report."""
    out = subprocess.run(["trace-cmd", "report", "-i", str(trace)], capture_output=True, text=True, check=True).stdout
    events = []
    for line in out.splitlines():
        m = _LINE.match(line)
        if m and m.group(3) in (*NUMA_KINDS, "mm_migrate_pages"):
            fields = dict(re.findall(r"(\w+)=(\S*)", m.group(4)))
            events.append((int(m.group(1)), float(m.group(2)), m.group(3), fields))
    return events


def check_structure(trace: dict) -> None:
    """What every export must satisfy (Perfetto's importer rules, see the module doc)."""
    json.loads(json.dumps(trace))  # plain JSON
    assert trace["displayTimeUnit"] == "ms"
    evs = trace["traceEvents"]
    meta = [e for e in evs if e["ph"] == "M"]
    assert any(e["name"] == "process_name" and e["pid"] == PID for e in meta)
    names = {e["tid"]: e["args"]["name"] for e in meta if e["name"] == "thread_name"}
    assert names and all(name == f"CPU {tid}" for tid, name in names.items())
    instants = [e for e in evs if e["ph"] == "i"]
    on_track = {(e["tid"], e["ts"]) for e in instants if e["s"] == "t"}
    for e in instants:
        assert e["s"] in ("t", "g") and isinstance(e["ts"], (int, float))
        if e["s"] == "t":
            assert e["pid"] == PID and e["tid"] in names
    starts = {e["id"]: e for e in evs if e["ph"] == "s"}
    ends = {}
    for e in evs:
        if e["ph"] == "f":
            assert e["id"] not in ends, "a flow id is used twice"
            ends[e["id"]] = e
    assert set(starts) == set(ends)
    for fid, s in starts.items():
        f = ends[fid]
        assert (s["cat"], s["name"]) == (f["cat"], f["name"])  # Perfetto keys v1 flows by (id, cat, name)
        assert f["bp"] == "e" and f["ts"] == s["ts"]
        assert (s["tid"], s["ts"]) in on_track and (f["tid"], f["ts"]) in on_track  # slices to bind to
        src = next(e for e in instants if e["cat"] == "numa" and e["tid"] == s["tid"] and e["ts"] == s["ts"])
        assert src["name"] == s["name"] in ("sched_move_numa", "sched_swap_numa")
        assert f["tid"] == src["args"]["dst_cpu"] and s["tid"] == src["args"]["src_cpu"]


# --- synthetic, exact ------------------------------------------------------------------------


def test_flows_for_move_and_swap_none_for_stick() -> None:
    move = Event(
        10.5,
        2,
        "numa01",
        267,
        "sched_move_numa",
        {"pid": "267", "tgid": "265", "ngid": "267", "src_cpu": "2", "src_nid": "1", "dst_cpu": "1", "dst_nid": "0"},
    )
    swap = Event(
        11.25,
        7,
        "numa01",
        270,
        "sched_swap_numa",
        {"src_pid": "270", "src_cpu": "7", "src_nid": "3", "dst_pid": "272", "dst_cpu": "3", "dst_nid": "1"},
    )
    stick = Event(
        12.0,
        3,
        "numa01",
        272,
        "sched_stick_numa",
        {"src_pid": "272", "src_cpu": "3", "src_nid": "1", "dst_pid": "0", "dst_cpu": "-1", "dst_nid": "-1"},
    )
    mig = [
        Event(
            10.1 + i / 10,
            0,
            "numa01",
            271,
            "mm_migrate_pages",
            {"nr_succeeded": "512", "nr_failed": "1", "reason": "numa_misplaced"},
        )
        for i in range(3)
    ]
    out = trace_events(TraceData([move, swap, stick, *mig]), 8, marks={"workload start": 5.0})
    check_structure(out)
    evs = out["traceEvents"]
    flows = [(e["ph"], e["tid"], e["ts"]) for e in evs if e["ph"] in "sf"]
    assert flows == [("s", 2, 10_500_000.0), ("f", 1, 10_500_000.0), ("s", 7, 11_250_000.0), ("f", 3, 11_250_000.0)]
    st = next(e for e in evs if e["name"] == "sched_stick_numa")
    assert st["tid"] == 3 and st["args"]["dst_cpu"] == -1 and st["args"]["comm"] == "numa01"
    mv = next(e for e in evs if e["name"] == "sched_move_numa" and e["ph"] == "i")
    assert mv["args"] == {
        "comm": "numa01",
        "pid": 267,
        "tgid": 265,
        "ngid": 267,
        "src_cpu": 2,
        "src_nid": 1,
        "dst_cpu": 1,
        "dst_nid": 0,
    }
    pages = [e for e in evs if e["ph"] == "C" and e["name"] == "pages migrated/s"]
    assert [(p["ts"], p["args"]["succeeded"]) for p in pages] == [(10_000_000.0, 1536), (11_000_000.0, 0)]
    assert sum(p["args"]["failed"] for p in pages) == 3
    assert [e["name"] for e in evs if e["ph"] == "i" and e["s"] == "g"] == ["workload start"]
    assert {e["tid"] for e in evs if e["name"] == "thread_name"} == set(range(8))


def test_unreadable_trace_gives_an_empty_timeline(tmp_path) -> None:
    run = tmp_path / "run"
    shutil.copytree(ON[0], run)
    (run / "trace.dat").write_bytes(b"\0" * 64)
    out = perfetto_trace(RunRecord.load(run))
    assert out["otherData"]["problems"]
    assert not [e for e in out["traceEvents"] if e["ph"] != "M" and e.get("cat") != "numalab"]


# --- real traces --------------------------------------------------------------------------------


@needs_trace_cmd
@pytest.mark.parametrize("run", ON + OFF, ids=lambda p: p.name)
def test_real_trace_export_matches_trace_cmd(run: Path) -> None:
    rec = RunRecord.load(run)
    out = perfetto_trace(rec)
    check_structure(out)
    evs = out["traceEvents"]
    truth = report_events(run / "trace.dat")
    expect = Counter(name for _, _, name, _ in truth)
    got = Counter(e["name"] for e in evs if e["ph"] == "i" and e["cat"] == "numa")
    for kind in NUMA_KINDS:
        assert got[kind] == expect[kind], kind
    # One flow per move and per swap with a destination CPU; none for sticks.
    flows = Counter(e["name"] for e in evs if e["ph"] == "s")
    assert flows["sched_move_numa"] == sum(
        1 for _, _, n, f in truth if n == "sched_move_numa" and int(f["dst_cpu"]) >= 0
    )
    assert flows["sched_swap_numa"] == sum(
        1 for _, _, n, f in truth if n == "sched_swap_numa" and int(f["dst_cpu"]) >= 0
    )
    assert flows["sched_stick_numa"] == 0
    # Instants sit on the source CPU, at the trace's timestamp in µs.
    for cpu, ts, name, f in truth:
        if name in NUMA_KINDS:
            assert any(
                e["ph"] == "i" and e["name"] == name and e["tid"] == int(f["src_cpu"]) and abs(e["ts"] - ts * 1e6) < 0.5
                for e in evs
            ), (cpu, ts, name)
    # Page migrations: the counters add up to the trace's own numbers.
    mig = [f for _, _, n, f in truth if n == "mm_migrate_pages"]
    pages = [e for e in evs if e["ph"] == "C" and e["name"] == "pages migrated/s"]
    calls = [e for e in evs if e["ph"] == "C" and e["name"] == "mm_migrate_pages calls/s"]
    assert sum(e["args"]["succeeded"] for e in pages) == sum(int(f["nr_succeeded"]) for f in mig)
    assert sum(e["args"]["failed"] for e in pages) == sum(int(f["nr_failed"]) for f in mig)
    assert sum(e["args"]["calls"] for e in calls) == len(mig)
    if run in OFF:
        assert not [e for e in evs if e["ph"] in ("i", "s", "f") and e.get("cat") == "numa"]


@needs_trace_cmd
def test_balancing_on_has_flows() -> None:
    flows = sum(1 for r in ON for e in perfetto_trace(RunRecord.load(r))["traceEvents"] if e["ph"] == "s")
    assert flows > 0

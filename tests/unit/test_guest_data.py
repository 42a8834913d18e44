"""Guest data is untrusted: every parser of a guest's files returns a value or a recorded problem, never raises
(the exact inputs of issue 21, then properties over arbitrary bytes), tars that clash are unpack problems, text
for a terminal is escaped, and what numalab writes is strict JSON. No VM (tests/vm/test_vm_guest_fuzz.py boots
real ones)."""

from __future__ import annotations

import io
import json
import math
import shutil
from pathlib import Path

import pytest
from common import guest_tar
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.analysis import compare as cmp
from lab.analysis.kernel_complaints import complaints
from lab.analysis.metrics import metric_values, run_metrics
from lab.analysis.node_cpu import node_cpu_time
from lab.analysis.node_memory import node_memory
from lab.analysis.readback import (
    build_id,
    check_topology,
    read_sched_domains,
    read_topology,
    read_vmstat,
    read_vmstat_series,
)
from lab.analysis.record import RunRecord
from lab.analysis.results import unpack_results
from lab.analysis.sched_verbose import check_groups, parse_dump
from lab.errors import LabError
from lab.paths import json_text, write_json_atomic
from lab.report import ab_table
from lab.topology.model.spec import load_topology
from lab.topology.model.tiers import check_tiers, read_tiers
from lab.trace.assemble import assemble_run
from lab.trace.tracedat import stats_lost, stats_per_cpu
from lab.untrusted import finite_copy, guest_json, term_safe, to_float, to_int
from lab.vm.console import parse_stage
from lab.vm.tcg import tcg_boot, tcg_clock
from lab.workloads.registry import WORKLOADS, get_workload
from lab.workloads.workload_output import parse_output

N = "/sys/devices/system/node"
GOOD_TOPOLOGY = f"""\
{N}/node0/cpulist:0-1
{N}/node1/cpulist:2-3
{N}/node0/distance:10 20
{N}/node1/distance:20 10
/sys/devices/system/cpu/online:0-3
{N}/node0/meminfo:Node 0 MemTotal:         469116 kB
{N}/node1/meminfo:Node 1 MemTotal:         516096 kB
"""
DATA = Path(__file__).resolve().parents[1] / "data" / "runs"
ON = sorted(DATA.glob("ring4-numa01-on-*"))
OFF = sorted(DATA.glob("ring4-numa01-off-*"))


def _readback(tmp_path: Path, topology: bytes = GOOD_TOPOLOGY.encode(), schedstat: bytes = b"") -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "topology.txt").write_bytes(topology)
    (tmp_path / "schedstat.txt").write_bytes(schedstat)
    return tmp_path


# --- the exact inputs of issue 21 ---------------------------------------------------------------------------


def test_a_distance_row_that_is_not_numbers_is_a_problem_not_a_traceback(tmp_path) -> None:
    run = _readback(tmp_path, (GOOD_TOPOLOGY + f"{N}/node1/distance:10 abc\n").encode())
    problems: list[str] = []
    got = read_topology(run, problems)
    assert problems == ["topology.txt line 8: '10 abc' is not a row of distances"]
    assert got is not None and got["nodes"][1]["distances"] == [20, 10]  # the good line stands


def test_topology_that_is_not_utf8_is_read_with_the_problem_named(tmp_path) -> None:
    run = _readback(tmp_path, GOOD_TOPOLOGY.encode() + b"\xff\xfe \xc3(\n")
    problems: list[str] = []
    got = read_topology(run, problems)
    assert problems == [f"topology.txt: not UTF-8 text (line 8, byte {len(GOOD_TOPOLOGY.encode())})"]
    assert got is not None and sorted(got["nodes"]) == [0, 1]


def test_a_schedstat_domain_line_that_is_not_a_mask_is_a_problem(tmp_path) -> None:
    run = _readback(tmp_path, schedstat=b"version 15\ncpu0 0 0 0\ndomain0 zzz 1 2\ndomain1 f 1 2\n")
    problems: list[str] = []
    domains = read_sched_domains(run, problems)
    assert problems == ["schedstat.txt line 3: 'domain0 zzz 1 2' is not a domain line of version 15"]
    assert domains == {0: [{"level": 1, "name": "?", "cpus": "0-3"}]}


def test_schedstat_16_and_17_are_read_and_17_names_its_domains(tmp_path) -> None:
    """6.12 writes version 16 (the mask second), 7.x version 17 ("domainN NAME MASK ..."): both give the same spans;
    17's names stand where debugfs gave none, and a name that debugfs contradicts is a problem."""
    v16 = _readback(tmp_path / "16", schedstat=b"version 16\ntimestamp 1\ncpu0 0 0 0\ndomain0 3 1 2\ndomain1 f 1 2\n")
    problems: list[str] = []
    assert read_sched_domains(v16, problems) == {0: [{"level": 0, "name": "?", "cpus": "0-1"},
                                                     {"level": 1, "name": "?", "cpus": "0-3"}]}  # fmt: skip
    assert problems == []
    v17 = _readback(tmp_path / "17", schedstat=b"version 17\ntimestamp 1\ncpu0 0 0 0\ndomain0 MC 3 1 2\n"
                                               b"domain1 NUMA f 1 2\n")  # fmt: skip
    assert read_sched_domains(v17, problems) == {0: [{"level": 0, "name": "MC", "cpus": "0-1"},
                                                     {"level": 1, "name": "NUMA", "cpus": "0-3"}]}  # fmt: skip
    assert problems == []
    (v17 / "sched-domains.txt").write_text("/sys/kernel/debug/sched/domains/cpu0/domain0/name:PKG\n")
    read_sched_domains(v17, problems)
    assert problems == ["schedstat.txt line 4: cpu0 domain0 is 'MC' here and 'PKG' in sched-domains.txt"]
    bad = _readback(tmp_path / "bad", schedstat=b"version 17\ncpu0 0 0 0\ndomain0 3 1 2\n")
    problems = []
    assert read_sched_domains(bad, problems) == {0: []}
    assert problems == ["schedstat.txt line 3: 'domain0 3 1 2' is not a domain line of version 17"]


def test_a_schedstat_version_numalab_does_not_read_is_one_problem_and_no_domains(tmp_path) -> None:
    run = _readback(tmp_path, schedstat=b"version 18\ncpu0 0 0 0\ndomain0 MC 3 q 1 2\n")
    problems: list[str] = []
    assert read_sched_domains(run, problems) == {}
    assert problems == ["schedstat.txt: version 18, which numalab does not read (it reads 15, 16, 17)"]


def test_a_result_of_100000_brackets_or_5000_digits_is_refused() -> None:
    w = get_workload("numa01")
    assert parse_output(w, "NUMALAB_RESULT " + "[" * 100000) == {
        "parse_error": "NUMALAB_RESULT line: nested more than 32 deep"
    }
    digits = parse_output(w, "NUMALAB_RESULT " + "1" * 5000)
    assert digits == {"parse_error": "NUMALAB_RESULT line: a number of 5000 digits"}
    assert parse_output(w, 'NUMALAB_RESULT {"elapsed_s": ' + "9" * 5000 + ', "gbps": 1}')["parse_error"]


def test_a_result_that_is_not_the_workloads_figures_is_refused() -> None:
    w = get_workload("pairs")
    good = {"elapsed_s": 1.5, "gbps": 0.1, "round_trips_per_s": 10, "per_pair": [{"pair": 0}], "workload": "pairs"}
    assert parse_output(w, "noise\nNUMALAB_RESULT " + json.dumps(good)) == good
    not_a_number = "not a finite number"
    cases = {
        "[1,2,3]": "NUMALAB_RESULT is a JSON list, not an object",
        '"fast"': "NUMALAB_RESULT is a JSON str, not an object",
        '{"elapsed_s": 1, "gbps": 1}': "NUMALAB_RESULT has no round_trips_per_s",
        '{"elapsed_s": "1", "gbps": 1, "round_trips_per_s": 1}': f"NUMALAB_RESULT elapsed_s is '\"1\"', {not_a_number}",
        '{"elapsed_s": true, "gbps": 1, "round_trips_per_s": 1}': f"NUMALAB_RESULT elapsed_s is 'true', {not_a_number}",
        '{"elapsed_s": NaN, "gbps": 1, "round_trips_per_s": 1}': "NUMALAB_RESULT line: NaN is not a number",
        '{"elapsed_s": 1, "gbps": -Infinity, "round_trips_per_s": 1}': "NUMALAB_RESULT line: -Infinity is not a number",
        '{"elapsed_s": 1e400, "gbps": 1, "round_trips_per_s": 1}': "NUMALAB_RESULT line: 1e400 is not a finite number",
    }
    for line, why in cases.items():
        assert parse_output(w, f"NUMALAB_RESULT {line}") == {"parse_error": why}, line
    # perf bench's lines: a value that is not a number is not kept
    lines = " speed, 1.2.3, GB/sec, total-speed\n time, 2.0, secs, runtime-max/thread\n"
    perf = parse_output(get_workload("perf-numa01"), lines)
    assert perf["gbps"] is None and perf["elapsed_s"] == 2.0


def test_every_lab_workload_declares_the_figures_compare_reads() -> None:
    from lab.analysis.metrics import METRICS

    for w in WORKLOADS.values():
        if w.kind == "lab":
            names = {m.name for m in w.metrics}
            assert {"elapsed_s", "gbps"} <= names, w.name
            assert all(f"workload.{k}" in {m.key for m in METRICS} for k in names), w.name


# --- tars that would erase the record -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "readback, results, problems",
    [
        ([("./uname.txt", b"6.1\n"), ("./uname.txt", b"6.2\n")], None, ["readback.tar: 'uname.txt' is in it twice"]),
        (None, [("./x", b"f"), ("./x/", None)], ["results.tar: 'x' is both a file and a directory"]),
        (None, [("./x", b"f"), ("./x/y", b"g")], ["results.tar: 'x' is both a file and a directory"]),
        (None, [("./d/", None), ("./d", b"f")], ["results.tar: 'd' is both a file and a directory"]),
        ([("./topology.txt", b"t\n")], [("./topology.txt", b"forged\n")],
         ["results.tar: topology.txt is already in the run directory"]),
        ([("./trace-raw/", None)], [("./trace-raw/kallsyms", b"k")],
         ["results.tar: trace-raw is already in the run directory"]),
        (None, [("./manifest.json", b"{}")], ["results.tar: manifest.json is a file the host writes"]),
        (None, [("./qemu.log/", None)], ["results.tar: qemu.log is a file the host writes"]),
    ],
)  # fmt: skip
def test_tars_that_clash_are_unpack_problems_and_leave_nothing_of_themselves(tmp_path, readback, results,
                                                                                problems) -> None:  # fmt: skip
    share, run = tmp_path / "share", tmp_path / "run"
    share.mkdir()
    run.mkdir()
    (run / "console.log").write_text("boot\n")
    for name, members in (("readback.tar", readback), ("results.tar", results)):
        if members is not None:
            guest_tar(share / name, members)
    before = {p.name for p in run.iterdir()}
    got = unpack_results(share, run)
    assert got.problems == problems
    if readback is None:
        assert {p.name for p in run.iterdir()} == before  # the refused tar left nothing behind
    assert not [p for p in run.iterdir() if p.name.startswith(".")]  # no scratch directory either


def test_kallsyms_sent_as_a_directory_fails_the_trace_not_the_run(tmp_path) -> None:
    raw = tmp_path / "trace-raw"
    (raw / "kallsyms" / "x").mkdir(parents=True)
    (raw / "cpu0").write_bytes(b"\0" * 4096)
    (raw / "tracing" / "events").mkdir(parents=True)
    (raw / "tracing" / "events" / "header_page").write_text("")
    assemble_run(tmp_path)
    assert (tmp_path / "trace-record.rc").read_text() == "1\n"
    assert "host: trace-raw/kallsyms is not a file" in (tmp_path / "trace-record.log").read_text()


def test_a_trace_record_log_sent_as_a_directory_does_not_stop_the_run(tmp_path) -> None:
    (tmp_path / "trace-raw").mkdir()
    (tmp_path / "trace-record.log").mkdir()
    (tmp_path / "trace.dat").mkdir()
    assemble_run(tmp_path)  # no exception: the note is lost, the rc stays
    assert (tmp_path / "trace-record.rc").read_text() == "1\n"


# --- the other readers, on nonsense ---------------------------------------------------------------------------

NONSENSE = [
    "9" * 5000, "-" + "1" * 5000, "\xb2", "\u0661\u0662", "nan", "inf", "1e999", "0-4294967295", "\x1b]0;t\x07",
    "[" * 5000, "cpu" + "9" * 5000 + " 1 2 3", "cpu\xb2 1 2", "domain" + "9" * 5000 + " ff", "@ nan", "@ 1e999",
    "@ " + "1" * 5000, "numa_hint_faults " + "9" * 5000, "numa_hint_faults \xb2",
    f"{N}/node0/cpulist:0-99999999", f"{N}/node{'7' * 5000}/cpulist:0", "node x cpulist 0", "node 0 distance 10 -1",
    "/sys/devices/virtual/memory_tiering/memory_tier4/nodelist:0-4294967295",
    "/sys/devices/system/node/node0/access0/initiators/read_latency:\xb2",
    "CPU" + "9" * 5000 + " attaching sched-domain(s):", " domain-0: span=0-4294967295 level=NUMA",
    "  groups: 0:{ span=0-4294967295 }, 1:{ span=zz }",
    "tsc: Refined TSC clocksource calibration: " + "9" * 400 + ".0 MHz",
    "tsc: PIT calibration deviates from HPET: " + "1" * 5000 + " 2",
    "/sys/kernel/tracing/per_cpu/cpu0/stats:entries: " + "9" * 5000, "cpu" + "9" * 5000,
]  # fmt: skip


def _all_readers(run: Path, text: str) -> None:
    """Every reader of a guest file over ``text`` (in each file it could be). None may raise."""
    topo = load_topology("ring-2")
    names = ("topology.txt", "schedstat.txt", "sched-domains.txt", "tiers.txt", "vmstat.start", "vmstat.end",
             "vmstat.series", "stat.start", "stat.end", "trace-stats.txt", "kernel-notes.bin",
             "numa-nodes.series")  # fmt: skip
    for name in names:
        (run / name).write_text(text, errors="surrogateescape")
    problems: list[str] = []
    readback = read_topology(run, problems)
    domains = read_sched_domains(run, problems)
    check_topology(topo, readback, domains)
    read_vmstat(run / "vmstat.start")
    read_vmstat_series(run / "vmstat.series")
    node_memory(run, topo, 0.0)
    node_cpu_time(run, topo)
    stats_per_cpu(run / "trace-stats.txt")
    stats_lost(run / "trace-stats.txt")
    build_id(run / "kernel-notes.bin")
    check_tiers({"tiers": {}}, read_tiers(text))
    complaints(text)
    check_groups(topo, parse_dump(text))
    tcg_clock.trusted_khz(text)
    tcg_clock.clock_problem(text)
    tcg_boot._SKIPPED.search(text)
    parse_stage("NUMALAB-STAGE " + text, 0.0)
    for w in WORKLOADS.values():
        parse_output(w, "NUMALAB_RESULT " + text)
        parse_output(w, text)
    run_metrics(run, topo, (), None)


@pytest.mark.parametrize("line", NONSENSE)
def test_every_reader_takes_nonsense_without_raising(tmp_path, line) -> None:
    _all_readers(tmp_path, line + "\n")
    _all_readers(tmp_path, GOOD_TOPOLOGY + line + "\n" + line)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("utf-8", "surrogateescape")))
def test_property_every_reader_is_total(tmp_path_factory, text) -> None:
    _all_readers(tmp_path_factory.mktemp("r"), text)


@settings(max_examples=150, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=20),
                    lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                    max_leaves=30))  # fmt: skip
def test_property_a_result_is_kept_only_as_an_object_of_finite_figures(value) -> None:
    for w in WORKLOADS.values():
        if w.kind != "lab":
            continue
        try:
            text = json.dumps(value)
        except ValueError:
            continue
        got = parse_output(w, "NUMALAB_RESULT " + text)
        if "parse_error" not in got:
            assert all(isinstance(got[k], (int, float)) and math.isfinite(got[k]) for k in w.numbers)
        json_text(got)  # strict JSON, always


# --- small helpers ---------------------------------------------------------------------------------------------


def test_numbers_from_a_guest_are_bounded() -> None:
    assert to_int(" 42 ") == 42 and to_int("-3") == -3
    for bad in ("9" * 41, "\xb2", "\u0661", "1_0", "0x10", "", "4 2"):
        assert to_int(bad) is None, bad
    assert to_float("1.5") == 1.5 and to_float("12") == 12.0
    for bad in ("nan", "inf", "1e999", "9" * 400, "1_0.0", "0x1p3"):
        assert to_float(bad) is None, bad


def test_guest_json_is_bounded_and_finite() -> None:
    assert guest_json('{"a": [1, 2.5, "x"]}') == {"a": [1, 2.5, "x"]}
    assert guest_json('"[[[["') == "[[[["  # brackets in a string are not nesting
    for bad, why in (("[" * 33 + "]" * 33, "nested more than 32 deep"), ("NaN", "NaN is not a number"),
                     ("[1e400]", "1e400 is not a finite number"), ("{", "not valid JSON")):  # fmt: skip
        with pytest.raises(ValueError, match=why.replace("[", r"\[")):
            guest_json(bad)


def test_terminal_text_has_no_control_characters() -> None:
    hostile = "6.1\x1b]0;title\x07\x1b[2J\rover\x9b31m\x00\u202eevil\nnext\ttab"
    safe = term_safe(hostile)
    assert safe == "6.1\\x1b]0;title\\x07\\x1b[2J\\x0dover\\x9b31m\\x00\\u202eevil\\x0anext\ttab"
    assert term_safe(hostile, newlines=True).count("\n") == 1
    assert not any(ord(c) < 32 and c != "\t" for c in safe)


def test_strict_json_refuses_nan_and_finite_copy_replaces_it(tmp_path) -> None:
    with pytest.raises(ValueError):
        json_text({"x": float("nan")})
    copy, where = finite_copy({"a": [1.0, float("inf")], "b": {"c": float("nan")}, "d": 2})
    assert copy == {"a": [1.0, None], "b": {"c": None}, "d": 2} and where == ["a[1]", "b.c"]
    write_json_atomic(tmp_path / "x.json", copy)
    assert json.loads((tmp_path / "x.json").read_text()) == copy


# --- records made before: report and compare keep going ------------------------------------------------------


def _copy(src: Path, dst: Path, change) -> Path:
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    change(m)
    (dst / "manifest.json").write_text(json.dumps(m))  # (NaN as Python writes it: what old records hold)
    return dst


def test_a_record_with_a_list_result_gives_no_value_and_one_with_nan_is_refused(tmp_path) -> None:
    """A list where the result object belongs (an older numalab kept it): no figure, no crash. A NaN in a
    record (an older numalab wrote them) is refused by the record reader, in one line (lab.datafile)."""

    def listed(m: dict) -> None:
        m["workload"]["result"] = [1, 2, 3]

    rec = _copy(ON[0], tmp_path / "listed", listed)
    values = metric_values(RunRecord.load(rec).manifest)
    assert not any(k.startswith("workload.") for k in values)
    c = cmp.compare_runs([RunRecord.load(p) for p in OFF], [RunRecord.load(rec), *map(RunRecord.load, ON[1:])])
    json.loads(ab_table.to_json(c), parse_constant=lambda name: pytest.fail(name))

    def nan(m: dict) -> None:
        m["metrics"]["vmstat"]["numa_pages_migrated"] = float("nan")

    with pytest.raises(LabError, match="manifest.json: NaN is not a finite number"):
        RunRecord.load(_copy(ON[0], tmp_path / "nan", nan))


def test_compare_leaves_out_a_run_whose_trace_could_not_be_read(tmp_path) -> None:
    def unreadable(m: dict) -> None:
        m["metrics"] |= {"trace_problems": ["trace-cmd report failed: bad page"], "trace_unreadable": True,
                         "trace_incomplete": True}  # fmt: skip
        m["trace_incomplete"] = True

    rec = _copy(ON[0], tmp_path / "unreadable", unreadable)
    c = cmp.compare_runs([RunRecord.load(p) for p in OFF], [RunRecord.load(rec), *map(RunRecord.load, ON[1:])])
    assert "unreadable (trace incomplete: trace-cmd report failed: bad page)" in c.excluded
    assert any("could not be read" in n for n in c.notes)


def test_metrics_of_a_trace_that_cannot_be_read_mark_the_run(tmp_path) -> None:
    (tmp_path / "trace.dat").write_bytes(b"not a trace")
    m = run_metrics(tmp_path, load_topology("ring-2"), ("sched:sched_move_numa",), None)
    assert m["trace_problems"] and m["trace_unreadable"] and m["trace_incomplete"]
    assert m["events"] == {"sched_move_numa": None}  # (issue 38: not counted, so null, not 0)


def test_the_summary_of_an_ok_run_says_its_trace_could_not_be_read_and_escapes_the_guest() -> None:
    from lab.run.summary import print_summary

    m = json.loads((ON[0] / "manifest.json").read_text())
    m["kernel"]["guest_release"] = "6.1\x1b]0;pwned\x07"
    m["reason"] = "ok\rforged"
    m["metrics"] |= {"trace_problems": ["trace-cmd report failed: bad page"], "trace_unreadable": True,
                     "events": {"sched_move_numa": None}}  # fmt: skip
    out = io.StringIO()
    print_summary(m, out)
    text = out.getvalue()
    assert "events (NOT MEASURED: the trace could not be read) sched_move_numa=-" in text
    assert "  PROBLEM: trace-cmd report failed: bad page" in text
    assert "numalab compare leaves this run out" in text
    assert "kernel stock (6.1\\x1b]0;pwned\\x07)" in text and "(ok\\x0dforged)" in text
    assert not any(ord(c) < 32 and c != "\n" for c in text)

"""A kernel under test is untrusted: real VMs (ring-2, the stock kernel, TCG) whose guest init sends
mutated readback, results, tars, console and result lines through its mutation hook (test fault
``mutate``), many mutations per boot. numalab must write a complete record every time, with the status and
the problems in it, no traceback, nothing outside the record and no raw control character on the terminal.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
from common import numalab
from guest_fuzz import put, readback_script, results_script, script, tar_bytes, tar_script

from lab.record_files import CONSOLE_LOG, MANIFEST, QEMU_ARGV
from lab.run.status import STATUSES

pytestmark = pytest.mark.vm

SEED = int(os.environ.get("NUMALAB_FUZZ_SEED", "21"))
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise AssertionError(f"{name} in a record's JSON")

    return json.loads(text, parse_constant=refuse)


def _fuzz_run(tmp_path, script: str, *extra: str) -> tuple[dict, str]:
    """One VM run with the mutation script; the record's manifest and what numalab printed. Checks what
    every hostile run must keep: no traceback, a whole record and nothing written beside it."""
    (tmp_path / "mutate.sh").write_text(script)
    before = sorted(p.name for p in tmp_path.iterdir())
    out = tmp_path / "run"
    proc = numalab("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--timeout", "240",
                   "--test-fault", f"mutate={tmp_path / 'mutate.sh'}", "--out", str(out), *extra,
                   timeout=400)  # fmt: skip
    printed = proc.stdout + proc.stderr
    assert proc.returncode in (0, 1), printed
    assert "Traceback" not in printed
    assert not RAW_CONTROL.search(printed), [ln for ln in printed.splitlines() if RAW_CONTROL.search(ln)]
    m = _strict((out / MANIFEST).read_text())
    assert m["status"] in STATUSES and m["reason"]
    assert f"run {m['run_id']}: {m['status']}" in proc.stdout
    for name in (CONSOLE_LOG, QEMU_ARGV, MANIFEST):
        assert (out / name).is_file(), name
    assert set(m["files"]) <= {p.name for p in out.iterdir()}
    # Nothing beside the record: no .partial, no file the guest named.
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*before, "run"])
    for root, _dirs, files in os.walk(out):
        for f in files:
            if f.endswith(".json"):
                _strict(Path(root, f).read_text())
    return m, printed


def test_mutated_readback_is_refused_line_by_line_and_recorded(tmp_path) -> None:
    m, printed = _fuzz_run(tmp_path, readback_script(SEED))
    assert m["status"] == "topology-mismatch", m["reason"]
    assert "the guest's topology readback is malformed" in m["reason"]
    problems = m["guest_topology"]["problems"]
    assert any("topology.txt line" in p and "'10 abc' is not a row of distances" in p for p in problems), problems
    assert any("topology.txt: not UTF-8 text" in p for p in problems), problems
    assert any("schedstat.txt line" in p and "'domain0 zzz'" in p for p in problems), problems
    # The guest's release and console reached the terminal escaped; a panic printed by userspace is not one.
    assert "\\x1b]0;pwned\\x07" in printed
    assert b"Kernel panic - not syncing" in (tmp_path / "run" / CONSOLE_LOG).read_bytes()
    assert m["panic_hint"] == {"console": "Kernel panic - not syncing: printed by guest userspace", "pvpanic": False}


def test_mutated_results_and_result_lines_are_refused_and_recorded(tmp_path) -> None:
    m, printed = _fuzz_run(tmp_path, results_script(SEED))
    assert m["status"] == "workload-failed", m["reason"]
    assert m["workload"]["result"] == {"parse_error": "NUMALAB_RESULT line: nested more than 32 deep"}
    # trace-raw/kallsyms sent as a directory: the trace is not assembled, and that is said (first: the
    # trace's failure comes before the result's in the classification).
    # (a trace-record.rc the mutations turned into a directory is no exit code: the result's refusal is next)
    assert m["reason"] in (
        "trace capture failed (exit 1; see trace-record.log)",
        "the workload's result was refused: NUMALAB_RESULT line: nested more than 32 deep",
    )
    log = tmp_path / "run" / "trace-record.log"
    assert not log.is_file() or b"trace-raw/kallsyms is not a file" in log.read_bytes()  # (unless a directory)
    assert m["metrics"]["trace_problems"] and m["metrics"]["trace_unreadable"]
    # Every reader was total; what is named is the two stage marks the guest forged on its console (issue 38).
    problems = m["guest_data_problems"]
    assert len(problems) == 2 and all(p.startswith("console: a stage mark without the init's token") for p in problems)


def test_clashing_members_in_both_tars_are_unpack_problems(tmp_path) -> None:
    """readback.tar names one file twice; results.tar has a file and then a directory of the same name."""
    readback = tar_bytes([("./topology.txt", b"a\n"), ("./topology.txt", b"b\n")])
    results = tar_bytes([("./workload.rc", b"0\n"), ("./x", b"file\n"), ("./x/", None), ("./x/y", b"\n")])
    m, _ = _fuzz_run(tmp_path, tar_script(readback, results))
    assert m["unpack_problems"] == [
        "readback.tar: 'topology.txt' is in it twice",
        "results.tar: 'x' is both a file and a directory",
    ]
    assert m["status"] == "topology-mismatch"
    assert m["reason"] == ("the guest's topology readback was rejected: readback.tar: 'topology.txt' is in it twice")


def test_a_results_member_that_clashes_with_the_readback_or_a_host_file_is_an_unpack_problem(tmp_path) -> None:
    results = tar_bytes([("./workload.rc", b"0\n"), ("./topology.txt", b"forged\n")])
    m, _ = _fuzz_run(tmp_path, tar_script(None, results))
    assert m["unpack_problems"] == ["results.tar: topology.txt is already in the run directory"]
    assert m["status"] == "workload-failed"
    assert m["guest_topology_ok"] is True  # the readback sent first stands
    assert "forged" not in (tmp_path / "run" / "topology.txt").read_text()


# Issue 38: a figure from the guest is checked before it is believed.


def test_forged_stage_marks_and_impossible_figures_end_in_a_whole_implausible_record(tmp_path) -> None:
    """Guest userspace forges stage marks (one without the token, as any process can; one with it, as a guest
    that read the init's memory could), rewrites vmstat.start and stat.start, and reports elapsed_s -5."""
    readback = [
        put("/dev/console", b"NUMALAB-STAGE failed results-mount 1.0\n"),
        'echo "NUMALAB-STAGE $NUMALAB_K workload-end 0 99999" > /dev/console',
    ]
    results = [
        "sed -i 's/^numa_pages_migrated .*/numa_pages_migrated 999999999999999999999999999999/' $2/vmstat.start",
        "sed -i 's/^cpu0 .*/cpu0 99999999999999 0 0 0 0 0 0 0/' $2/stat.start",
        """sed -i 's/"elapsed_s":[0-9.]*/"elapsed_s":-5/' $2/workload.out""",
    ]
    m, printed = _fuzz_run(tmp_path, script({"readback": readback, "results": results}))
    assert m["status"] == "implausible", m["reason"]
    assert m["reason"].startswith("the host's own observation contradicts the guest: console: a stage mark without")
    problems = m["guest_data_problems"]
    assert problems[0].startswith("console: a stage mark without the init's token, not taken (forged by the guest?): "
                                  "'failed' 'results-mount'")  # fmt: skip
    assert any(p.startswith("stage mark workload-end: uptime 99999 s, but the VM had run") for p in problems), problems
    assert "stage mark workload-end: a second time (the init gives it once; not a timing)" in problems
    assert "the workload's elapsed_s is -5, below 0" in problems
    # (the forged start less the guest's own count at the end: pages balancing migrated during the run, 0 on a
    # quiet host, a few when the guest ran slower, as beside a cold suite's other VMs on 2 cores)
    end = next(int(ln.split()[1]) for ln in (tmp_path / "run" / "vmstat.end").read_text().splitlines()
               if ln.startswith("numa_pages_migrated "))  # fmt: skip
    went_down = f"vmstat: numa_pages_migrated went down by {10**30 - 1 - end:,} between vmstat.start and vmstat.end"
    assert any(p.startswith(went_down) for p in problems), (went_down, problems)
    assert any(p.startswith("/proc/stat: node 0's busy time went down by") for p in problems), problems
    # Both clocks are recorded; the contradicted marks give no timing; the init's own marks stand.
    assert m["timings"]["workload_s"] is None and m["timings"]["workload_host_s"] is None
    assert [s["name"] for s in m["stages"] if s.get("contradicted")] == ["workload-end", "workload-end"]
    names = ["booted", "topology", "workload-end", "workload-start", "workload-end", "collect", "done"]
    assert [s["name"] for s in m["stages"]] == names  # (the forged one came during the readback's mutation)
    assert "the guest init failed" not in m["reason"] and "NUMALAB-STAGE" not in m["reason"]
    assert "  PROBLEM: the workload's elapsed_s is -5, below 0" in printed


def test_a_backtracking_pattern_and_a_result_that_is_not_utf8_neither_hang_nor_pass(tmp_path) -> None:
    """A workload file whose pattern backtracks under Python's re ('^(a+)+$'), over 44 'a' and a '!' the guest
    prints (RE2 reads it in linear time), and bytes that are not UTF-8 in its output and its uname."""
    (tmp_path / "w.sh").write_text("#!/bin/sh\nprintf '%s!\\n\\377\\376 ops: 1\\n' " + "a" * 44 + "\n")
    wl = tmp_path / "w.yaml"
    wl.write_text("command: ./w.sh\nfiles: [w.sh]\nresults: {regex: {v: '^(a+)+$'}}\n"
                  "metrics: [{name: v, higher_is_better: true}]\n")  # fmt: skip
    (tmp_path / "mutate.sh").write_text(script({"readback": [put("$2/uname.txt", b"6.1.0-\xff\xfe\n")]}))
    out = tmp_path / "run"
    t0 = time.monotonic()
    proc = numalab("run", "--topology", "ring-2", "--workload", str(wl), "--duration", "1", "--timeout", "240",
                   "--test-fault", f"mutate={tmp_path / 'mutate.sh'}", "--out", str(out), timeout=400)  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert time.monotonic() - t0 < 200
    m = _strict((out / MANIFEST).read_text())
    assert m["status"] == "workload-failed"
    assert m["workload"]["result"] == {"parse_error": "v: no match for '^(a+)+$' in the workload output"}
    assert "uname.txt: not UTF-8 text (line 1, byte 6)" in m["guest_data_problems"]
    assert "workload.out: not UTF-8 text (line 2, byte 46)" in m["guest_data_problems"]


def test_a_results_tar_of_5000_files_is_stopped_at_the_member_limit(tmp_path) -> None:
    """5,000 empty files beside the results: the init's own tar carries them (the byte limit alone let it in)."""
    make = "i=0; while [ $i -lt 5000 ]; do : > $2/f$i; i=$((i+1)); done"  # (builtins: no fork a file)
    m, _ = _fuzz_run(tmp_path, script({"results": [make]}))
    assert m["status"] == "limit-exceeded", m["reason"]
    limit = r"stopped: results.tar has more than 10[0-9][0-9] members \(files and directories\)"
    assert re.fullmatch(limit, m["reason"]), m["reason"]
    assert not list((tmp_path / "run").glob("f*"))

"""A kernel under test is untrusted: real VMs (ring-2, the stock kernel, TCG) whose guest init sends
mutated readback, results, tars, console and result lines through its mutation hook (test fault
``mutate``), many mutations per boot. numalab must write a complete record every time, with the status and
the problems in it, no traceback, nothing outside the record and no raw control character on the terminal.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from common import numalab
from guest_fuzz import readback_script, results_script, tar_bytes, tar_script

from lab.record_files import CONSOLE_LOG, MANIFEST, QEMU_ARGV
from lab.vm.status import STATUSES

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
    assert "guest_data_problems" not in m, m.get("guest_data_problems")  # every reader was total


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

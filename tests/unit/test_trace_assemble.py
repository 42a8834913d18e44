"""raw trace mode, host side: numalab-tracegrab's output -> trace.dat with the real trace-cmd restore."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lab.guest.image import build_workloads
from lab.trace.assemble import RAW_DIR, assemble_run
from lab.trace.tracedat import read_trace

TRACEFS = Path("/sys/kernel/tracing")


def test_no_raw_trace_is_a_no_op(tmp_path) -> None:
    assemble_run(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_incomplete_raw_trace_is_recorded_not_raised(tmp_path) -> None:
    (tmp_path / RAW_DIR).mkdir()
    (tmp_path / RAW_DIR / "cpu0").write_bytes(b"")
    assemble_run(tmp_path)
    assert (tmp_path / "trace-record.rc").read_text().strip() == "1"
    assert "no per-CPU trace data or tracefs headers" in (tmp_path / "trace-record.log").read_text()
    assert not (tmp_path / "trace.dat").exists()
    assert (tmp_path / RAW_DIR / "cpu0").is_file()  # kept for a look
    assert sorted(p.name for p in tmp_path.iterdir()) == [RAW_DIR, "trace-record.log", "trace-record.rc"]


def _write(path: Path, value: str) -> None:
    path.write_text(value)


@pytest.fixture
def host_tracefs():
    """The host's tracefs, mounted for the test if it is not (and unmounted after)."""
    if os.geteuid() != 0:
        pytest.skip("needs root for the host's tracefs")
    mounted = False
    if not (TRACEFS / "events").is_dir():
        proc = subprocess.run(["mount", "-t", "tracefs", "tracefs", str(TRACEFS)], capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.skip(f"cannot mount tracefs here: {proc.stderr.strip()}")
        mounted = True
    yield TRACEFS
    if mounted:
        subprocess.run(["umount", str(TRACEFS)], check=False)


def _grab(tmp_path: Path, events: list[str]) -> subprocess.CompletedProcess:
    """Trace ``events`` on the host for a moment, then run numalab-tracegrab on its tracefs."""
    tool = build_workloads() / "numalab-tracegrab"
    enables = [TRACEFS / "events" / e.split(":")[0] / e.split(":")[1] / "enable" for e in events]
    was_on = (TRACEFS / "tracing_on").read_text().strip()
    try:
        _write(TRACEFS / "tracing_on", "0")
        _write(TRACEFS / "trace", "")
        for enable in enables:
            _write(enable, "1")
        _write(TRACEFS / "tracing_on", "1")
        subprocess.run(["sleep", "0.1"], check=True)  # a context switch or two, and timers, for sure
        _write(TRACEFS / "tracing_on", "0")
        return subprocess.run([str(tool), str(tmp_path / RAW_DIR), *events], capture_output=True, text=True)
    finally:
        for enable in enables:
            _write(enable, "0")
        _write(TRACEFS / "tracing_on", was_on)


def test_tracegrab_on_this_host_then_restore_gives_a_trace_cmd_readable_file(tmp_path, host_tracefs) -> None:
    """The guest tool is a plain static binary: run it against the host's own tracefs."""
    proc = _grab(tmp_path, ["sched:sched_switch"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / RAW_DIR / "tracing" / "events" / "sched" / "sched_switch" / "format").exists()
    # sched_switch prints no kernel symbols: no kallsyms (0.05 s to generate in a TCG guest)
    assert not (tmp_path / RAW_DIR / "kallsyms").exists() and "kallsyms" not in proc.stdout
    assemble_run(tmp_path)
    assert not (tmp_path / RAW_DIR).exists()  # replaced by trace.dat
    trace = read_trace(tmp_path / "trace.dat", ("sched_switch",))
    assert not trace.problems, trace.problems
    assert len(trace.named("sched_switch")) > 0
    report = subprocess.run(["trace-cmd", "report", "-i", str(tmp_path / "trace.dat")], capture_output=True, text=True)
    assert report.returncode == 0 and "sched_switch:" in report.stdout


def test_an_event_that_prints_symbols_brings_kallsyms(tmp_path, host_tracefs) -> None:
    """hrtimer_expire_entry prints its callback with %ps: trace-cmd report needs kallsyms to name it."""
    if not (TRACEFS / "events" / "timer" / "hrtimer_expire_entry").is_dir():
        pytest.skip("no timer:hrtimer_expire_entry on this host")
    proc = _grab(tmp_path, ["timer:hrtimer_expire_entry"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / RAW_DIR / "kallsyms").stat().st_size > 0 and ", kallsyms" in proc.stdout
    assemble_run(tmp_path)
    report = subprocess.run(["trace-cmd", "report", "-i", str(tmp_path / "trace.dat")], capture_output=True, text=True)
    lines = [ln for ln in report.stdout.splitlines() if "hrtimer_expire_entry:" in ln]
    assert lines, report.stdout[-2000:]
    # named callbacks (tick_sched_timer, hrtimer_wakeup, ...), not bare addresses
    assert any("function=" in ln and "function=0x" not in ln for ln in lines), lines[:5]


def test_tracegrab_rejects_a_malformed_event(tmp_path) -> None:
    tool = build_workloads() / "numalab-tracegrab"
    proc = subprocess.run([str(tool), str(tmp_path / "x"), "nocolon"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "numalab-tracegrab: error: nocolon: expected SYSTEM:EVENT"

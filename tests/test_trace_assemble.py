"""raw trace mode, host side: numalab-tracegrab's output -> trace.dat with the real trace-cmd restore."""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path

import pytest

from lab.guest.image import build_workloads
from lab.trace.assemble import RAW_DIR, RAW_TAR, assemble_run
from lab.trace.tracedat import read_trace

TRACEFS = Path("/sys/kernel/tracing")


def _tar(run_dir: Path) -> None:
    """What the guest init does: tar -cf trace-raw.tar trace-raw."""
    with tarfile.open(run_dir / RAW_TAR, "w") as tf:
        tf.add(run_dir / RAW_DIR, arcname=RAW_DIR)


def test_no_raw_trace_is_a_no_op(tmp_path) -> None:
    assemble_run(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_incomplete_raw_trace_is_recorded_not_raised(tmp_path) -> None:
    (tmp_path / RAW_DIR).mkdir()
    (tmp_path / RAW_DIR / "cpu0").write_bytes(b"")
    _tar(tmp_path)
    assemble_run(tmp_path)
    assert (tmp_path / "trace-record.rc").read_text().strip() == "1"
    assert "no per-CPU trace data or tracefs headers" in (tmp_path / "trace-record.log").read_text()
    assert not (tmp_path / "trace.dat").exists()
    assert (tmp_path / RAW_TAR).is_file()  # kept for a look
    assert sorted(p.name for p in tmp_path.iterdir()) == [RAW_DIR, RAW_TAR, "trace-record.log", "trace-record.rc"]


def test_a_tar_with_paths_outside_trace_raw_is_refused(tmp_path) -> None:
    (tmp_path / "evil").write_text("x")
    with tarfile.open(tmp_path / RAW_TAR, "w") as tf:
        tf.add(tmp_path / "evil", arcname="../evil")
    assemble_run(tmp_path)
    assert "unexpected member '../evil'" in (tmp_path / "trace-record.log").read_text()
    assert not (tmp_path.parent / "evil").exists()


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


def test_tracegrab_on_this_host_then_restore_gives_a_trace_cmd_readable_file(tmp_path, host_tracefs) -> None:
    """The guest tool is a plain static binary: run it against the host's own tracefs."""
    tool = build_workloads() / "numalab-tracegrab"
    event = TRACEFS / "events" / "sched" / "sched_switch" / "enable"
    was_on = (TRACEFS / "tracing_on").read_text().strip()
    try:
        _write(TRACEFS / "tracing_on", "0")
        _write(TRACEFS / "trace", "")
        _write(event, "1")
        _write(TRACEFS / "tracing_on", "1")
        subprocess.run(["sleep", "0.1"], check=True)  # a context switch or two for sure
        _write(TRACEFS / "tracing_on", "0")
        proc = subprocess.run(
            [str(tool), str(tmp_path / RAW_DIR), "sched:sched_switch"], capture_output=True, text=True
        )
    finally:
        _write(event, "0")
        _write(TRACEFS / "tracing_on", was_on)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / RAW_DIR / "tracing" / "events" / "sched" / "sched_switch" / "format").exists()
    _tar(tmp_path)
    assemble_run(tmp_path)
    assert not (tmp_path / RAW_TAR).exists()  # replaced by trace.dat
    trace = read_trace(tmp_path / "trace.dat", ("sched_switch",))
    assert not trace.problems, trace.problems
    assert len(trace.named("sched_switch")) > 0
    report = subprocess.run(["trace-cmd", "report", "-i", str(tmp_path / "trace.dat")], capture_output=True, text=True)
    assert report.returncode == 0 and "sched_switch:" in report.stdout


def test_tracegrab_rejects_a_malformed_event(tmp_path) -> None:
    tool = build_workloads() / "numalab-tracegrab"
    proc = subprocess.run([str(tool), str(tmp_path / "x"), "nocolon"], capture_output=True, text=True)
    assert proc.returncode == 1
    assert proc.stderr.strip() == "numalab-tracegrab: error: nocolon: expected SYSTEM:EVENT"

"""trace.dat from a guest's raw trace buffers, assembled on the host with ``trace-cmd restore``.

In the default ``raw`` trace mode the guest does not run ``trace-cmd extract``
(which writes the format of every one of the kernel's trace events into
trace.dat: over a second of small reads under TCG). Instead
``numalab-tracegrab`` (images/workloads/tracegrab.c) copies the per-CPU ring
buffer pages, the formats of the traced events and of ``events/ftrace``, the
header pages, printk formats, saved cmdlines and kallsyms into ``trace-raw/``,
which reaches the host as ``trace-raw.tar`` (results shares are flat), and
the host runs trace-cmd's own tool for exactly this:

    trace-cmd restore -c -t trace-raw/tracing -k trace-raw/kallsyms -o head.dat
    trace-cmd restore -i head.dat -o trace.dat trace-raw/cpu0 trace-raw/cpu1 ...

The result is an ordinary trace.dat that ``trace-cmd report`` reads.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path

from lab.errors import LabError

RAW_DIR = "trace-raw"
RAW_TAR = "trace-raw.tar"


def _restore(args: list[str]) -> None:
    try:
        proc = subprocess.run(["trace-cmd", "restore", *args], capture_output=True, text=True, errors="replace")
    except FileNotFoundError:
        raise LabError("trace-cmd: not found on the host; install trace-cmd (make setup)") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        raise LabError(f"trace-cmd restore failed: {' / '.join(lines[-2:]) or 'exit ' + str(proc.returncode)}")


def assemble(raw: Path, out: Path) -> int:
    """Write ``out`` (trace.dat) from a numalab-tracegrab directory. Returns the number of CPUs.
    ``out`` appears only when complete."""
    cpus = sorted((p for p in raw.iterdir() if re.fullmatch(r"cpu\d+", p.name)), key=lambda p: int(p.name[3:]))
    if not cpus or not (raw / "tracing" / "events" / "header_page").exists():
        raise LabError(f"{raw}: no per-CPU trace data or tracefs headers (numalab-tracegrab did not finish)")
    head = raw / "head.dat"
    tmp = out.with_name(f".{out.name}.tmp")
    _restore(["-c", "-t", str(raw / "tracing"), "-k", str(raw / "kallsyms"), "-o", str(head)])
    _restore(["-i", str(head), "-o", str(tmp), *map(str, cpus)])
    os.replace(tmp, out)
    return len(cpus)


def _unpack(tar: Path, into: Path) -> Path:
    """The guest's tar of trace-raw/, unpacked with every member checked (plain files and
    directories under trace-raw/ only)."""
    try:
        with tarfile.open(tar) as tf:
            members = tf.getmembers()
            for m in members:
                parts = Path(m.name).parts
                if not (m.isfile() or m.isdir()) or not parts or parts[0] != RAW_DIR or ".." in parts:
                    raise LabError(f"{tar.name}: unexpected member {m.name!r}")
            tf.extractall(into, members=members)  # noqa: S202 (members checked above)
    except (tarfile.TarError, OSError) as e:
        raise LabError(f"{tar.name}: {e}") from None
    return into / RAW_DIR


def assemble_run(run_dir: Path) -> None:
    """Turn a run's ``trace-raw.tar`` into ``trace.dat``. A failure is recorded in the run, not
    raised: it goes to trace-record.log and trace-record.rc, and the tar is kept for a look."""
    tar = run_dir / RAW_TAR
    if not tar.is_file():
        return
    tmp = Path(tempfile.mkdtemp(prefix=".trace-raw-", dir=run_dir))
    try:
        cpus = assemble(_unpack(tar, tmp), run_dir / "trace.dat")
    except LabError as e:
        with open(run_dir / "trace-record.log", "a") as log:
            log.write(f"host: {e}\n")
        (run_dir / "trace-record.rc").write_text("1\n")
        return
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    with open(run_dir / "trace-record.log", "a") as log:
        log.write(f"host: trace.dat assembled with trace-cmd restore from {cpus} per-CPU buffers\n")
    tar.unlink()

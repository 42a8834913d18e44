"""trace.dat from a guest's raw trace buffers, assembled on the host with ``trace-cmd restore``.

In the default ``raw`` trace mode the guest does not run ``trace-cmd extract``
(which writes the format of every one of the kernel's trace events into
trace.dat: over a second of small reads under TCG). Instead
``numalab-tracegrab`` (images/workloads/tracegrab.c) copies the per-CPU ring
buffer pages, the formats of the traced events and of ``events/ftrace``, the
header pages, printk formats, saved cmdlines and, when an event prints kernel
symbols, kallsyms into ``trace-raw/`` (else the host gives restore an empty
kallsyms). It reaches the host with the rest of the guest's results
(lab/analysis/results.py), and the host runs trace-cmd's own tool for exactly
this:

    trace-cmd restore -c -t trace-raw/tracing -k trace-raw/kallsyms -o head.dat
    trace-cmd restore -i head.dat -o trace.dat trace-raw/cpu0 trace-raw/cpu1 ...

The result is an ordinary trace.dat that ``trace-cmd report`` reads.
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import subprocess
from pathlib import Path

from lab.errors import LabError
from lab.record_files import TRACE_DAT, TRACE_RAW, TRACE_RECORD_LOG, TRACE_RECORD_RC

RAW_DIR = TRACE_RAW


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
    cpus = sorted((p for p in raw.iterdir() if re.fullmatch(r"cpu\d{1,5}", p.name)), key=lambda p: int(p.name[3:]))
    if not cpus or not (raw / "tracing" / "events" / "header_page").exists():
        raise LabError(f"{raw.name}: no per-CPU trace data or tracefs headers (numalab-tracegrab did not finish)")
    head = raw / "head.dat"
    tmp = out.with_name(f".{out.name}.tmp")
    # kallsyms only comes when a traced event prints kernel symbols (numalab-tracegrab decides).
    # Without -k, restore would take the host's /proc/kallsyms: the wrong kernel's symbols.
    kallsyms = raw / "kallsyms"
    if kallsyms.exists() and not kallsyms.is_file():
        raise LabError(f"{raw.name}/kallsyms is not a file")
    if not kallsyms.exists():
        kallsyms.write_bytes(b"")
    _restore(["-c", "-t", str(raw / "tracing"), "-k", str(kallsyms), "-o", str(head)])
    _restore(["-i", str(head), "-o", str(tmp), *map(str, cpus)])
    os.replace(tmp, out)
    return len(cpus)


def assemble_run(run_dir: Path) -> None:
    """Turn a run's ``trace-raw/`` into ``trace.dat``. A failure is recorded in the run, not
    raised: it goes to trace-record.log and trace-record.rc, and trace-raw/ is kept for a look."""
    raw = run_dir / RAW_DIR
    if not raw.is_dir():
        return
    try:
        cpus = assemble(raw, run_dir / TRACE_DAT)
    except (LabError, OSError) as e:
        # (an OSError here is a name the guest sent that the host cannot write over, trace.dat as a
        # directory; a full or read-only disk is the host's and is raised)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO):
            raise
        why = e if isinstance(e, LabError) else f"cannot write trace.dat ({e.strerror or e})"
        _note(run_dir, f"host: {why}\n", "1\n")
        return
    _note(run_dir, f"host: trace.dat assembled with trace-cmd restore from {cpus} per-CPU buffers\n")
    shutil.rmtree(raw)


def _note(run_dir: Path, line: str, rc: str | None = None) -> None:
    """A line for trace-record.log (and trace-record.rc): the guest sent those files too, so a name it took
    for something else (a directory) loses the note rather than the run."""
    for name, text, mode in ((TRACE_RECORD_LOG, line, "a"), (TRACE_RECORD_RC, rc, "w")):
        if text is None:
            continue
        try:
            with open(run_dir / name, mode) as f:
                f.write(text)
        except IsADirectoryError:
            pass

"""One run: topology + kernel + workload -> a complete run record on the host.

The run goes through three stages, each a module of its own, each handing the next one value
(docs/architecture.md draws it): :mod:`lab.run.prepare` (the guest image and how QEMU boots it:
:class:`~lab.run.prepare.Prepared`), :mod:`lab.run.boot` (the VM: :class:`~lab.run.boot.Booted`) and
:mod:`lab.run.collect` (the guest's files read, the run classified: the manifest). Every stage reads the
run's :class:`~lab.run.request.Trip`. This module makes the record's directory, runs the stages and writes
the manifest.

The record is written into ``.<id>.partial`` next to its final place and
renamed when complete, so a directory without the dot is always whole.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError
from lab.paths import json_text, run_scratch, utf8_path, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.record_files import MANIFEST
from lab.run.boot import boot
from lab.run.collect import collect
from lab.run.prepare import prepare
from lab.run.request import RunRequest, Trip
from lab.untrusted import finite_copy, term_safe


class Interrupted(BaseException):
    """SIGTERM/SIGINT during a run. A BaseException, as KeyboardInterrupt is: the nets that keep a guest's bad
    file from stopping a run (lab.run.collect._guarded: ``except Exception``) must not swallow the user's signal."""


def _run_id(req: RunRequest) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{stamp}-{req.topology.name}-{req.kernel.name}-{req.workload.name}-{secrets.token_hex(2)}"


def _install_signal_handlers() -> dict:
    def handler(signum, _frame):
        raise Interrupted(signal.Signals(signum).name)

    return {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}


def _prepare_out(final: Path, given: bool = True) -> Path:
    """Make the hidden ``.<name>.partial`` directory next to ``final``; one-line errors for an --out
    that cannot be a new directory (exists, under a regular file, read-only, under /proc...)."""
    # (lab.run.options checks --out and --runs-dir first; here for a run id, e.g. of a kernel file's name)
    utf8_path(final, "--out" if given else "the run record")
    if final.exists() or final.is_symlink():
        raise LabError(f"--out {final}: already exists; give a new directory")
    above = next((p for p in final.parents if p.exists()), None)
    if above is not None and not above.is_dir():
        raise LabError(f"--out {final}: cannot make the run record there ({above} is not a directory)")
    partial = final.parent / f".{final.name}.partial"
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        if partial.is_symlink() or partial.is_file():
            partial.unlink()
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir()
        probe = partial / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise LabError(f"--out {final}: cannot make the run record there ({e.strerror or e})") from None
    return partial


def execute(req: RunRequest, progress: Callable[[str], None] | None = None) -> tuple[Path, dict]:
    """Boot, run, collect, classify. Returns (run dir, manifest). A failed guest is a result."""
    placement = plan_placement(req.topology, read_inventory(), req.backing, pinning=req.pinning,
                               one_thread=req.clock.virtual)  # fmt: skip
    run_id = _run_id(req)
    final = req.out if req.out else req.runs_root / run_id
    partial = _prepare_out(final, given=bool(req.out))
    # Progress lines carry the guest's words (stage details): escaped before they reach a terminal.
    say = (lambda msg: progress(term_safe(msg))) if progress else (lambda _msg: None)
    old_handlers = _install_signal_handlers()
    try:
        with run_scratch() as tmp:
            manifest = _execute(Trip(req, run_id, partial, tmp, placement, say, time.monotonic()))
        os.replace(partial, final)
        return final, manifest
    except OSError as e:
        # The disk filled up, or the directory went away: no half-written record is left behind.
        shutil.rmtree(partial, ignore_errors=True)
        where = e.filename or partial
        raise LabError(f"writing the run record {where}: {e.strerror or e}") from None
    finally:
        # On any other failure the '.partial' directory stays (for debugging) and
        # never looks complete: it has no manifest and a leading dot.
        for s, h in old_handlers.items():
            signal.signal(s, h)


def _execute(trip: Trip) -> dict:
    """The three stages, then the manifest written (strict JSON) into the '.partial' directory."""
    prep = prepare(trip)
    booted = boot(trip, prep)
    manifest, nonfinite = finite_copy(collect(trip, prep, booted))
    if nonfinite:  # (the readers refuse them; this is the net under them: the record stays strict JSON)
        manifest["nonfinite_values"] = nonfinite
    write_text_atomic(trip.record / MANIFEST, json_text(manifest, indent=2) + "\n")
    _check_room(trip.record)
    return manifest


MIN_FREE_BYTES = 1 << 20


def _check_room(d: Path) -> None:
    """A disk that filled up while the record was written may have cut a file short anywhere (QEMU's
    console log, trace-cmd's trace.dat): such a record is not kept."""
    st = os.statvfs(d)
    if st.f_bavail * st.f_frsize < MIN_FREE_BYTES:
        raise OSError(
            errno.ENOSPC, "No space left on device (less than 1 MiB free: the record may be cut short)", str(d)
        )

"""What a LAVA job leaves back, made a run record (``numalab matrix lava-import``; the jobs are
lab.matrix.lava's).

The import reads the job's log (the dispatcher's YAML lines: ``lava-run``'s standard output, or
``lavacli jobs logs --raw`` from a server): its ``target`` lines are the console, each with the dispatcher's
timestamp, which stands for the host's clock the stage marks are checked against (lab.vm.console.check_marks).
The results share the guest wrote is read as a direct run's is, by numalab's own collect stage
(lab.run.collect): the figures' marks, the guest's topology readback and the kernel's build-id are checked as
for every record. What LAVA's QEMU does not give: no vCPU pinning (no QMP: the record says so), no vCPU times.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import shlex
import shutil
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from lab.errors import LabError
from lab.matrix.lava import (
    B64_MARK,
    CONSOLE_LEVELS,
    CONSOLE_SHARE,
    DONE_MARK,
    END_MARK,
    FILE_MARK,
    JOBSET,
    LOG,
    NOT_PINNED,
    SIDECAR,
    STALLED_LOG,
    monitor_timeout_s,
)
from lab.paths import json_text, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.record_files import CONSOLE_LOG, MANIFEST, QEMU_ARGV
from lab.run.boot import Booted
from lab.run.collect import collect
from lab.run.manifest import GuestImage
from lab.run.options import RunOptions
from lab.run.prepare import Prepared
from lab.run.request import RunRequest, Trip
from lab.untrusted import finite_copy
from lab.vm.backend import BootSpec
from lab.vm.console import VmOutcome


def _log_entries(text: str) -> list[dict]:
    """The dispatcher's log, an entry ``{dt, lvl, msg}`` a line: lava-run writes each as a JSON object to its
    standard error, a server keeps them as a YAML list (``- {...}``: ``lavacli jobs logs --raw``). Read line by
    line: a log cut short by a killed dispatcher is read up to its last whole line."""
    import yaml  # (PyYAML is slow to import)

    out = []
    for line in text.splitlines():
        line = line.removeprefix("- ")
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:  # (a results entry's measurement is YAML: ``! "3.66"``)
            try:
                entry = yaml.safe_load(line)
            except yaml.YAMLError:
                continue
        if isinstance(entry, dict) and "dt" in entry:
            out.append(entry)
    return out


def _when(entry: dict) -> float:
    return datetime.fromisoformat(str(entry["dt"])).timestamp()


@dataclasses.dataclass
class JobLog:
    """What a LAVA job's log says: the console (its lines and when the dispatcher read them, from QEMU's start),
    the command LAVA booted, its monitor's cases, and how the job ended."""

    console: list[tuple[float, str]]
    command: str
    results: list[dict]
    status: str  # the job's end: "Complete", "Incomplete", "Canceled", or "" when the log ends before it
    error: str
    wall_s: float


def read_job_log(text: str) -> JobLog:
    entries = _log_entries(text)
    start = None
    command = ""
    console: list[tuple[float, str]] = []
    results: list[dict] = []
    status = error = ""
    for e in entries:
        msg, lvl = e.get("msg"), e.get("lvl")
        if lvl == "info" and isinstance(msg, str) and msg.startswith("Boot command: "):
            command, start = msg.removeprefix("Boot command: "), _when(e)
        elif lvl in CONSOLE_LEVELS and start is not None and isinstance(msg, str):
            console.append((_when(e) - start, msg))
        elif lvl == "results" and isinstance(msg, dict):
            results.append(msg)
            if msg.get("definition") == "lava" and msg.get("case") == "job":
                status = "Complete" if msg.get("result") == "pass" else "Incomplete"
                # (lava-run's log has the error beside the result; an older form had it in extra)
                extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
                error = str(msg.get("error_msg") or extra.get("error_msg") or "")
    end = _when(entries[-1]) - start if entries and start is not None else 0.0
    return JobLog(console, command, results, status, error, max(end, 0.0))


def outcome_of(log: JobLog, token: str) -> VmOutcome:
    """The VM's outcome as the direct backend's watcher would have had it: the stage marks (with the run's
    token; others kept aside as forged), each at the dispatcher's time from QEMU's start."""
    outcome = VmOutcome(exit_code=None, timed_out=False, wall_s=log.wall_s)
    for t, line in log.console:
        outcome.take(line, t, token)
    if log.status == "Complete" or any(s.name in ("done", "failed") for s in outcome.stages):
        outcome.exit_code = 0  # (QEMU ended with the guest's power-off: -no-reboot)
    elif "timed out" in log.error.lower() or "timeout" in log.error.lower():
        outcome.timed_out = True
    else:
        outcome.vm_failure = f"the LAVA job ended {log.status or 'before its end'}" + (
            f": {log.error[:300]}" if log.error else "")  # fmt: skip
    return outcome


def _request_of(sidecar: dict, progress: Callable[[str], None]) -> RunRequest:
    from lab.run.batch import requests_from_options  # (on use: start-up time)

    opts = RunOptions.from_dict(sidecar["options"], SIDECAR)
    return requests_from_options(opts, progress)[0]


def _prepared_of(sidecar: dict, req: RunRequest, d: Path) -> Prepared:
    boot = BootSpec(**(sidecar["boot"] | {"clock": req.clock}))
    image = sidecar["image"]
    return Prepared(boot, d / "share", GuestImage(tuple(image["tools"]), tuple(image["programs"]),
                                                   image["initrd_bytes"], image.get("user")),
                    sidecar["protocol"], sidecar["firmware"], sidecar["tsc_host"], None)  # fmt: skip


def import_job(job_dir: Path, runs: Path, progress: Callable[[str], None] = lambda _m: None) -> tuple[Path, dict]:
    """A run record of the LAVA job in ``job_dir`` (its sidecar, its log ``output.yaml``, its share), in
    ``runs``/<run id>, made by numalab's own collect stage; the manifest's backend says LAVA."""
    from lab.datafile import load_json  # (on use)
    from lab.run.execute import _prepare_out  # (on use: start-up time)

    sidecar = load_json(job_dir / SIDECAR)
    log_path = job_dir / LOG
    if not log_path.is_file():
        raise LabError(f"{job_dir}: no {LOG} (the job's log: lava-run's standard error, or lavacli jobs logs --raw)")
    log = read_job_log(log_path.read_text(errors="replace"))
    req = _request_of(sidecar, progress)
    run_id = f"lava-{sidecar['order']:03d}-{sidecar['run_id']}"
    final = runs / sidecar["run_id"]  # (the matrix's run id, as numalab matrix run names its records)
    partial = _prepare_out(final)
    placement = plan_placement(req.topology, read_inventory(), req.backing, pinning=req.pinning)
    trip = Trip(req, run_id, partial, job_dir, placement, progress, time.monotonic() - log.wall_s)
    prep = _prepared_of(sidecar, req, job_dir)
    if sidecar.get("results") == "console":
        prep = dataclasses.replace(prep, share=job_dir / CONSOLE_SHARE)
    # (the results' base64 lines are the share's files, not the console's)
    (partial / CONSOLE_LOG).write_text("".join(f"{ln}\n" for _, ln in log.console if not ln.startswith(B64_MARK)))
    (partial / QEMU_ARGV).write_text(log.command + "\n")
    outcome = outcome_of(log, prep.boot.stage_token)
    argv = shlex.split(log.command) if log.command else []
    ws, we = outcome.stage("workload-start"), outcome.stage("workload-end")
    info = {"name": "lava", "version": "", "argv": argv, "exit_code": outcome.exit_code,
            "lava": {"job_status": log.status, "error": log.error,
                     "monitor": [r for r in log.results if r.get("definition") != "lava"]}}  # fmt: skip
    share, carried = job_dir / "share", None
    if sidecar.get("results") == "console":
        share = job_dir / CONSOLE_SHARE
        carried = console_files(log, prep.boot.stage_token, share, req.limits().output_bytes)
        info["lava"]["console_results"] = carried
    recorded = placement.to_dict()  # (the manifest's placement: as planned, with what LAVA did not do)
    recorded["warnings"] = [*recorded.get("warnings", []), NOT_PINNED]
    info["placement"] = recorded
    booted = Booted(outcome, info, share, stalled_attempts(job_dir, monitor_timeout_s(req)),
                    None if ws is None else int(ws.host_s * 1e9),
                    None if we is None else int(we.host_s * 1e9))  # fmt: skip
    manifest, nonfinite = finite_copy(collect(trip, prep, booted))
    if nonfinite:
        manifest["nonfinite_values"] = nonfinite
    write_text_atomic(partial / MANIFEST, json_text(manifest, indent=2) + "\n")
    os.replace(partial, final)
    return final, manifest


def stalled_attempts(job_dir: Path, deadline_s: float) -> tuple[dict, ...]:
    """The job's attempts whose boot stalled before init (run-lava.sh kept their logs and ran the job once more),
    as a direct run's manifest names its stalled boots (lab.run.boot): LAVA's QEMU has no QMP, so where its vCPUs
    were is not known; its console's last lines are."""
    out = []
    for n in range(1, 10):
        path = job_dir / STALLED_LOG.format(n=n)
        if not path.is_file():
            break
        log = read_job_log(path.read_text(errors="replace"))
        out.append({"attempt": n, "deadline_s": deadline_s, "vm_s": round(log.wall_s, 2), "vm_at_timeout": None,
                    "console_tail": [ln for _, ln in log.console][-20:], "lava_error": log.error[:300],
                    "log": path.name})  # fmt: skip
    return tuple(out)


def console_files(log: JobLog, token: str, share: Path, limit: int) -> dict:
    """The files the init sent over the console (``--results console``: images/guest/init's dump), written into
    ``share`` (made anew) as the guest would have written them to a share: only the share's names, each once,
    its size as announced, all of them within the guest's output ``limit``. What was refused is named."""
    from lab.record_files import SHARE_FILES  # (on use)

    shutil.rmtree(share, ignore_errors=True)
    share.mkdir(mode=0o700)
    problems: list[str] = []
    files: dict[str, int] = {}
    name, size, chunks, total = None, 0, [], 0

    def close() -> None:
        nonlocal name
        if name is None:
            return
        try:
            data = base64.b64decode("".join(chunks), validate=True)
        except ValueError as err:
            problems.append(f"{name}: not base64 ({err})")
            data = None
        if data is not None and len(data) != size:
            problems.append(f"{name}: {len(data)} bytes came, {size} were announced (a line lost or broken?)")
        elif data is not None:
            (share / name).write_bytes(data)
            files[name] = size
        name = None

    for _, line in log.console:
        if line.startswith(B64_MARK) and name is not None:
            total += len(line)
            if total > limit * 4 // 3 + 4096:
                problems.append(f"more than the guest's output limit ({limit} bytes) came over the console")
                name = None
                break
            chunks.append(line[len(B64_MARK) :].strip())
        elif line.startswith(FILE_MARK) or line.startswith(END_MARK):
            close()
            words = line.split()
            if len(words) < 2 or words[1] != token:
                problems.append(f"a results line without the run's token, not taken: {line[:80]!r}")
            elif words[0] == FILE_MARK.strip() and len(words) == 4 and words[3].isdigit():
                if words[2] not in SHARE_FILES or words[2] in files:
                    problems.append(f"{words[2][:60]!r}: not a file the init sends (or sent twice), not taken")
                else:
                    name, size, chunks = words[2], int(words[3]), []
    close()
    return {"files": files, "problems": problems}


def job_done(job_dir: Path) -> bool:
    """Whether a job's log is whole (its dispatcher wrote the job's result): one still running or never run is
    not, and lava-import leaves it for a later import."""
    try:
        with open(job_dir / LOG, "rb") as f:
            f.seek(max(0, os.path.getsize(job_dir / LOG) - 65536))
            return DONE_MARK.encode() in f.read()
    except OSError:
        return False


@dataclasses.dataclass
class Imported:
    """What one lava-import did: records made (run id, status), jobs left for later, runs already imported."""

    made: list[tuple[Path, str, str]] = dataclasses.field(default_factory=list)
    waiting: list[str] = dataclasses.field(default_factory=list)
    already: list[str] = dataclasses.field(default_factory=list)
    summary: dict = dataclasses.field(default_factory=dict)


def import_set(given: Path, out: Path, progress: Callable[[str], None] = lambda _m: None) -> Imported:
    """The jobs of a job set (``given``, or one job's directory in it) into ``out`` as a matrix output directory
    (matrix.json, runs/<run id>/, summary.json, junit.xml, index.html), as numalab matrix run writes one: again,
    it imports the jobs done since (resume), and numalab matrix merge joins the outputs of a set's shards. The
    set's spec must still be the one it was made from (its fingerprint)."""
    from lab.datafile import load_json  # (on use)
    from lab.matrix.definition import load_matrix  # (on use: start-up time)
    from lab.matrix.outputs import write_outputs  # (on use: start-up time)
    from lab.matrix.schedule import check_out_dir, is_done  # (on use: start-up time)

    dirs = job_dirs(given)
    root = given if (given / JOBSET).is_file() else given.parent.parent
    meta = load_json(root / JOBSET) if (root / JOBSET).is_file() else None
    if not isinstance(meta, dict) or not isinstance(meta.get("fingerprint"), str):
        raise LabError(f"{root}: no {JOBSET} of numalab's (a job set made by numalab matrix lava names its spec there)")
    spec = load_matrix(str(meta.get("source")))
    if spec.fingerprint() != meta["fingerprint"]:
        raise LabError(f"{root}: its spec {meta.get('source')} has changed since the jobs were made (fingerprint "
                       f"{spec.fingerprint()}, the jobs' {meta['fingerprint']})")  # fmt: skip
    shard = tuple(meta["shard"]) if isinstance(meta.get("shard"), list) else None
    check_out_dir(out, spec, shard)  # type: ignore[arg-type]
    (out / "runs").mkdir(exist_ok=True)
    by_id = {r.id: r for r in spec.runs}
    done = Imported()
    for d in dirs:
        run_id = str(load_json(d / SIDECAR).get("run_id"))
        if run_id not in by_id:
            raise LabError(f"{d}: run {run_id} is not one of {meta.get('source')}'s")
        if is_done(out, by_id[run_id]):
            done.already.append(run_id)
        elif not job_done(d):
            done.waiting.append(run_id)
        else:
            record, manifest = import_job(d, out / "runs", progress)
            done.made.append((record, manifest["status"], manifest.get("reason", "")))
    runs = spec.shard(*shard) if shard else spec.runs
    done.summary = write_outputs(spec, runs, out, None, shard=shard)  # type: ignore[arg-type]
    return done


def job_dirs(root: Path) -> list[Path]:
    """The job directories of a job set (``root`` made by numalab matrix lava), or ``root`` if it is one."""
    if (root / SIDECAR).is_file():
        return [root]
    found = sorted(p.parent for p in (root / "jobs").glob(f"*/{SIDECAR}"))
    if not found:
        raise LabError(f"{root}: no LAVA job of numalab's here (numalab matrix lava --out DIR makes them)")
    return found

"""A matrix as LAVA jobs (``numalab matrix lava``), and what a LAVA job leaves back as a run record
(``numalab matrix lava-import``): issue #70.

One job a run of the matrix, on LAVA's stock ``qemu`` device type: the run's kernel and initramfs (numalab's
own guest image, with its plan and its stage-mark token) are the deploy's ``tmpfs`` images, numalab's machine
(lab.vm.qemu.qemu_argv.machine_args: accelerator, NUMA nodes, distances, CPUs) and the results share are the
job context's ``extra_options``, the boot is LAVA's ``qemu`` method, and a ``monitor`` test follows the guest
init's stage marks on the console (LAVA's judgement: a case a mark, its guest uptime as the measurement; the
run ends at the ``done`` or ``failed`` mark).

The import reads the job's log (the dispatcher's YAML lines: ``lava-run``'s standard output, or
``lavacli jobs logs --raw`` from a server): its ``target`` lines are the console, each with the dispatcher's
timestamp, which stands for the host's clock the stage marks are checked against (lab.vm.console.check_marks).
The results share the guest wrote is read as a direct run's is, by numalab's own collect stage
(lab.run.collect): the figures' marks, the guest's topology readback and the kernel's build-id are checked as
for every record. What LAVA's QEMU does not give: no vCPU pinning (no QMP: the record says so), no vCPU times.

The share is a directory on the worker, named in the job (an absolute path): the job's results come back
when the worker is the machine that imports them (``lava-run`` here, or a worker whose job directory is
shared with numalab). docs/lava.md says what a LAVA lab needs.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from lab.errors import LabError
from lab.paths import json_text, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.record_files import CONSOLE_LOG, MANIFEST, QEMU_ARGV
from lab.run.boot import Booted
from lab.run.collect import collect
from lab.run.manifest import GuestImage
from lab.run.options import RunOptions
from lab.run.prepare import Prepared, prepare
from lab.run.request import RunRequest, Trip
from lab.untrusted import finite_copy
from lab.vm.backend import BootSpec
from lab.vm.console import VmOutcome
from lab.vm.qemu.qemu_argv import machine_args, share_args

# The console's lines in the dispatcher's log: "target" while an action reads the console, "feedback" for what it
# reads after the action ended (the guest's last lines, its done mark among them, can come so: seen under load)
CONSOLE_LEVELS = ("target", "feedback")
JOBSET = "jobset.json"  # the job set's spec (name, source, fingerprint) and shard
DONE_MARK = '"case": "job"'  # the dispatcher's last result line of a job (pass or fail): its log is whole
SIDECAR = "numalab-run.json"  # what the import needs of the run: its options, its boot, its token
JOB = "job.yaml"
DEVICE = "device.yaml"  # the device configuration lava-run takes (the dictionary rendered with the job's context)
LOG = "output.yaml"  # the job's log, as lava-run writes it to its standard output
DICTIONARY = "numalab-host.jinja2"
ACCELS = ("tcg", "kvm")
RESULTS = ("share", "console")  # how the guest's results come back: the worker's directory, or the job's log
CONSOLE_ARG = "numalab.results=console"  # (images/guest/init: /results on tmpfs, its files over the console)
FILE_MARK, B64_MARK, END_MARK = "NUMALAB-FILE ", "NUMALAB-B64 ", "NUMALAB-FILE-END "
CONSOLE_SHARE = "console-share"  # the files the console carried, unpacked in the job's directory
DEVICE_TYPES = (Path("/etc/lava-server/dispatcher-config/device-types"), Path("/usr/share/lava-server/device-types"))
NOT_PINNED = (
    "LAVA: the vCPUs were not pinned and the placement was not watched (LAVA's qemu device type starts "
    "QEMU itself, without QMP): vcpu_pins are the plan's"
)
# Options LAVA's qemu device type gives itself (qemu.jinja2): -nographic makes -display none redundant, and its
# -m {{ memory }} is the topology's total, from the job context.
_LAVA_OWN = ("-display", "-m")


@dataclasses.dataclass(frozen=True)
class LavaJob:
    """One run of the matrix as a LAVA job: its directory under ``jobs/`` and the device slot it is tagged for."""

    run_id: str
    directory: str  # jobs/NNN-<run id>
    slot: int  # the device (tag numalab-slot-N) the pair it belongs to runs on
    pair: str  # (topology, workload, repeat): the cell whose kernels and settings are one A/B set


def check_lava_settings(spec) -> None:
    """What LAVA's qemu device type cannot run, a one-line error naming the run: another QEMU than the worker's
    qemu-system-x86_64, and the TCG plugin's modes (--remote-latency)."""
    for run in spec.runs:
        s = run.setting
        if s.qemu:
            raise LabError(f"{spec.source}: run {run.id}: settings {s.name}: qemu: {s.qemu}: LAVA's qemu device type "
                           "runs the worker's qemu-system-x86_64 (leave qemu out for LAVA)")  # fmt: skip
        if s.remote_latency != "off":
            raise LabError(f"{spec.source}: run {run.id}: settings {s.name}: remote_latency: {s.remote_latency}: the "
                           "TCG plugin does not run under LAVA (numalab matrix run runs it)")  # fmt: skip


def lava_extra_options(req: RunRequest, placement, boot: BootSpec) -> list[str]:
    """numalab's machine for the job context's ``extra_options``: each option with its value, one item each
    (LAVA joins them with spaces into the command it spawns). The console is the serial port on QEMU's standard
    output (-nodefaults leaves none), where LAVA reads it."""
    args = machine_args(req.topology, placement, boot)
    out: list[str] = []
    i = 0
    while i < len(args):
        opt = args[i]
        value = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
        i += 2 if value is not None else 1
        if opt in _LAVA_OWN:
            continue
        out.append(opt if value is None else f"{opt} {value}")
    out.append("-serial stdio")
    share = share_args(boot)
    out += [f"{share[j]} {share[j + 1]}" for j in range(0, len(share), 2)]
    for item in out:
        if any(c.isspace() for c in item.split(" ", 1)[-1]) or any(c in item for c in "\"'\\"):
            raise LabError(f"a QEMU option LAVA would split or quote: {item!r} (a path with spaces or quotes?)")
    return out


def _url(path: Path, url_base: str, root: Path) -> str:
    if url_base:
        return url_base.rstrip("/") + "/" + path.relative_to(root).as_posix()
    return path.resolve().as_uri()


def _copy_kernel(image: Path, root: Path) -> Path:
    """The boot image as an artefact of the job set (a hard link where it can be): the worker downloads it."""
    digest = hashlib.sha256(image.read_bytes()).hexdigest()[:12]
    dest = root / "artefacts" / f"kernel-{digest}"
    if not dest.exists():
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(image, dest)
        except OSError:
            shutil.copyfile(image, dest)
    return dest


def job_definition(req: RunRequest, run_id: str, prep: Prepared, extra: list[str], kernel_url: str,
                   initrd_url: str, slot: int, pair: str, order: int) -> dict:  # fmt: skip
    """The LAVA job (a dict in the order LAVA's own examples have)."""
    if any(c in prep.boot.cmdline for c in '"\\'):  # (LAVA's command line is split as a shell would)
        raise LabError(f"run {run_id}: the kernel command line has a quote or a backslash, which LAVA's "
                       "-append \"...\" would not keep: leave it out of --append for LAVA")  # fmt: skip
    token = re.escape(prep.boot.stage_token)
    timeout = int(req.timeout()) + 1
    mark = rf"NUMALAB-STAGE {token} "
    return {
        "device_type": "qemu",
        "job_name": f"numalab {run_id}",
        "tags": [f"numalab-slot-{slot}"],
        "priority": "medium",
        "visibility": "public",
        "metadata": {"numalab.run": run_id, "numalab.pair": pair, "numalab.order": order},
        "timeouts": {"job": {"seconds": timeout + 300}, "action": {"seconds": timeout}},
        "context": {
            "arch": "amd64",
            "no_kvm": req.accel != "kvm",
            "memory": req.topology.total_memory_mib,
            "extra_options": extra,
        },
        "actions": [
            {"deploy": {
                "to": "tmpfs",
                "timeout": {"minutes": 5},
                "images": {
                    "kernel": {"image_arg": f'-kernel {{kernel}} -append "{prep.boot.cmdline}"', "url": kernel_url},
                    "initrd": {"image_arg": "-initrd {initrd}", "url": initrd_url},
                },
            }},
            {"boot": {"method": "qemu", "media": "tmpfs", "timeout": {"seconds": timeout}}},
            {"test": {
                "timeout": {"seconds": timeout},
                "monitors": [{
                    "name": "numalab",
                    "start": rf"{mark}booted",
                    "end": rf"{mark}(done|failed)\b",
                    "pattern": rf"{mark}(?P<test_case_id>topology|workload-start|workload-end|collect)"
                               r" (?:\S+ )*?(?P<measurement>[0-9]+\.[0-9]+)\s",  # (\r\r\n: the pty's own \r)
                    "units": "s",
                }],
            }},
        ],
    }  # fmt: skip


def device_dictionary(accel: str) -> str:
    """The device dictionary of a numalab host (LAVA's qemu device type, x86-64; KVM or TCG)."""
    kvm = "False" if accel == "kvm" else "True"
    return (
        "{# a numalab host: LAVA's qemu device type, x86-64 (numalab matrix lava; docs/lava.md) #}\n"
        "{% extends 'qemu.jinja2' %}\n"
        "{% set arch = 'amd64' %}\n"
        f"{{% set no_kvm = no_kvm | default({kvm}) %}}\n"
    )


def find_device_types(given: Path | None) -> Path | None:
    """LAVA's device-type templates: the given directory, a LAVA server's (lava-server's package), or the ones
    make setup-lava unpacked into numalab's cache (lab.host.lava_templates)."""
    if given is not None:
        if not (given / "qemu.jinja2").is_file():
            raise LabError(f"--device-types {given}: no qemu.jinja2 there (LAVA's device-type templates: a LAVA "
                           "server's /etc/lava-server/dispatcher-config/device-types; make setup-lava)")  # fmt: skip
        return given
    from lab.host import lava_templates  # (on use)

    return next((d for d in DEVICE_TYPES if (d / "qemu.jinja2").is_file()), None) or lava_templates.find()


def render_device(device_types: Path, dictionary_dir: Path, context: dict) -> str:
    """The device configuration for lava-run: the dictionary rendered with LAVA's templates and the job's
    context, as a LAVA server renders it before it dispatches a job."""
    try:
        import jinja2  # (on use: only the device rendering needs it)
    except ImportError:
        raise LabError("rendering the device dictionary needs jinja2 (pip install jinja2)") from None
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader([str(dictionary_dir), str(device_types)]), trim_blocks=True, autoescape=False
    )
    return env.get_template(DICTIONARY).render(**context)


@dataclasses.dataclass(frozen=True)
class JobSetOptions:
    """How ``numalab matrix lava`` writes a job set: the device, the slots, where the worker finds the files, LAVA's
    templates, how the results come back, and the shard (i, N) of the matrix's runs (None: all of them)."""

    accel: str = "tcg"
    devices: int = 1
    url_base: str = ""
    device_types: Path | None = None
    results: str = "share"
    shard: tuple[int, int] | None = None


def write_jobs(spec, out: Path, kernel_args: dict[str, str], opts: JobSetOptions = JobSetOptions(),
               progress: Callable[[str], None] = lambda _m: None) -> list[LavaJob]:  # fmt: skip
    """The job set of ``spec`` (its shard's runs, with ``opts.shard``) in ``out``: jobs/NNN-<run>/ (job.yaml, the
    initramfs, the empty share, the sidecar, device.yaml if LAVA's templates are at hand), the device dictionary,
    jobs.txt (the submission order), run-lava.sh (lava-run over the set, in order; again: the jobs not done), a
    README, and jobset.json (the spec's name, source, fingerprint and the shard: what lava-import checks)."""
    accel, devices, url_base, results = opts.accel, opts.devices, opts.url_base, opts.results
    runs = spec.shard(*opts.shard) if opts.shard else spec.runs
    device_types = opts.device_types
    import yaml  # (PyYAML is slow to import)

    from lab.matrix.definition import run_options_of  # (on use: start-up time)
    from lab.run.batch import requests_from_options  # (on use: start-up time)

    if accel not in ACCELS:
        raise LabError(f"--accel {accel}: one of {', '.join(ACCELS)} (a LAVA device is one or the other)")
    if results not in RESULTS:
        raise LabError(f"--results {results}: one of {', '.join(RESULTS)}")
    if devices < 1:
        raise LabError(f"--devices {devices}: at least 1")
    check_lava_settings(spec)
    types = find_device_types(device_types)
    if out.exists() and any(out.iterdir()):
        raise LabError(f"--out {out}: not empty; give a new directory")
    out.mkdir(parents=True, exist_ok=True)
    root = out.resolve()
    write_text_atomic(root / DICTIONARY, device_dictionary(accel))
    meta = {"spec": spec.name, "source": spec.source, "fingerprint": spec.fingerprint(),
            "shard": list(opts.shard) if opts.shard else None}  # fmt: skip
    write_text_atomic(root / JOBSET, json_text(meta, indent=2) + "\n")
    cells = list(dict.fromkeys((r.topology.label, r.workload.name, r.repeat) for r in runs))
    jobs: list[LavaJob] = []
    inventory = read_inventory()
    for order, run in enumerate(runs, 1):
        cell = (run.topology.label, run.workload.name, run.repeat)
        slot = cells.index(cell) % devices + 1
        pair = f"{cell[0]}.{cell[1]}.r{cell[2]}"
        opts = run_options_of(run, kernel_args.get(run.kernel.name, run.kernel.spec), spec.timeout, accel=accel)
        req = requests_from_options(opts, progress)[0]
        d = root / "jobs" / f"{order:03d}-{run.id}"
        d.mkdir(parents=True)
        placement = plan_placement(req.topology, inventory, req.backing, pinning=req.pinning)
        trip = Trip(req, run.id, d, d, placement, progress, time.monotonic())
        prep = prepare(trip)  # the initramfs (d/initrd.cpio), the share (d/share), the kernel command line
        if results == "console":  # (no share device: the init sends its files over the console)
            prep = dataclasses.replace(prep, boot=dataclasses.replace(
                prep.boot, results_dir="", cmdline=f"{prep.boot.cmdline} {CONSOLE_ARG}"))  # fmt: skip
        progress(f"job {order}/{len(runs)}: {run.id} (slot {slot})")
        extra = lava_extra_options(req, placement, prep.boot)
        kernel = _copy_kernel(Path(prep.boot.kernel), root)
        job = job_definition(req, run.id, prep, extra, _url(kernel, url_base, root),
                             _url(Path(prep.boot.initrd), url_base, root), slot, pair, order)  # fmt: skip
        write_text_atomic(d / JOB, yaml.safe_dump(job, sort_keys=False, width=1000))
        sidecar = {
            "run_id": run.id, "order": order, "slot": slot, "pair": pair, "options": opts.to_dict(),
            "boot": dataclasses.asdict(prep.boot) | {"clock": None}, "protocol": prep.protocol,
            "firmware": prep.firmware, "tsc_host": prep.tsc_host, "image": dataclasses.asdict(prep.image),
            "extra_options": extra, "results": results,
        }  # fmt: skip
        write_text_atomic(d / SIDECAR, json_text(sidecar, indent=1) + "\n")
        if types is not None:
            write_text_atomic(d / DEVICE, render_device(types, root, job["context"]))
        jobs.append(LavaJob(run.id, d.relative_to(root).as_posix(), slot, pair))
    write_text_atomic(root / "jobs.txt", "".join(f"{j.slot} {j.directory}/{JOB}\n" for j in jobs))
    write_text_atomic(root / "run-lava.sh", _runner_script(jobs))
    (root / "run-lava.sh").chmod(0o755)
    write_text_atomic(root / "README.md", _readme(spec, jobs, accel, devices, types, results))
    return jobs


def _runner_script(jobs: list[LavaJob]) -> str:
    lines = [
        "#!/bin/sh",
        "# Every job of the set with lava-run (lava-dispatcher), in the submission order: this host is the worker.",
        "# Each job's log (lava-run's standard error) goes to its directory's output.yaml (numalab matrix",
        "# lava-import reads it). Run again, it runs the jobs whose log has no end yet (an interrupted set resumes).",
        'set -u\ncd "$(dirname "$0")"\nrc=0',
        f'done_job() {{ [ -f "$1/{LOG}" ] && grep -q \'{DONE_MARK}\' "$1/{LOG}"; }}',
    ]
    for n, j in enumerate(jobs, 1):
        d = shlex.quote(j.directory)
        lines.append(f"done_job {d} || {{ rm -rf {d}/lava {d}/share && mkdir {d}/lava && mkdir -m 700 {d}/share && "
                     f"lava-run --job-id {n} --output-dir {d}/lava --device {d}/{DEVICE} {d}/{JOB} "
                     f"> {d}/lava-run.out 2> {d}/{LOG} || rc=1; }}")  # fmt: skip
    return "\n".join(lines) + "\nexit $rc\n"


def _readme(spec, jobs: list[LavaJob], accel: str, devices: int, types: Path | None, results: str) -> str:
    rendered = (f"`jobs/*/{DEVICE}`: the dictionary rendered with LAVA's templates ({types}) and each job's "
                "context, for `lava-run`") if types else (
                f"no `{DEVICE}`: LAVA's device-type templates were not found (lava-server's "
                "`/etc/lava-server/dispatcher-config/device-types`; `--device-types DIR`)")  # fmt: skip
    back = "the job's log (--results console)" if results == "console" else "a share on the worker (--results share)"
    return f"""# {spec.name} as LAVA jobs

Made by `numalab matrix lava {spec.source}`: {len(jobs)} jobs, one a run, {accel.upper()}, on {devices} device
slot(s), the guest's results back through {back}. docs/lava.md has the whole story.

- `{DICTIONARY}`: the device dictionary of a numalab host (LAVA's `qemu` device type); {rendered}.
- `jobs.txt`: the jobs in their submission order, each with its slot. The A and B of a pair (a topology, workload
  and repeat with all its kernels and settings) share a slot: tag one device `numalab-slot-N` for each slot and
  submit the jobs in this order, and each device runs its pairs' jobs interleaved, A B A B.
- `jobs/NNN-RUN/`: `{JOB}`, the run's initramfs (`initrd.cpio`), its results share (`share/`, empty until the
  job runs: the job's QEMU writes it through virtio-9p, at the absolute path in the job), and `{SIDECAR}`
  (what the import needs; the run's stage-mark token is in it and in the job: keep both from the guest).
- `run-lava.sh`: every job with `lava-run` on this host, in order; each job's log lands in `jobs/NNN-RUN/{LOG}`.

Then `numalab matrix lava-import DIR --out RUNS` (DIR: this directory) makes a run record of each job, and
`numalab compare` / `numalab report` take them.
"""


# ---------------------------------------------------------------------------------------------- the import --


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
                extra = msg.get("extra") if isinstance(msg.get("extra"), dict) else {}
                error = str(extra.get("error_msg") or "")
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
    plan = placement.to_dict()  # (the manifest's placement: the plan's, with what LAVA did not do)
    plan["warnings"] = [*plan.get("warnings", []), NOT_PINNED]
    info["placement"] = plan
    booted = Booted(outcome, info, share, (), None if ws is None else int(ws.host_s * 1e9),
                    None if we is None else int(we.host_s * 1e9))  # fmt: skip
    manifest, nonfinite = finite_copy(collect(trip, prep, booted))
    if nonfinite:
        manifest["nonfinite_values"] = nonfinite
    write_text_atomic(partial / MANIFEST, json_text(manifest, indent=2) + "\n")
    os.replace(partial, final)
    return final, manifest


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

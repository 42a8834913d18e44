"""A matrix as LAVA jobs (``numalab matrix lava``); what a LAVA job leaves back is made a run record by
lab.matrix.lava_import (``numalab matrix lava-import``): issue #70.

One job a run of the matrix, on LAVA's stock ``qemu`` device type: the run's kernel and initramfs (numalab's
own guest image, with its plan and its stage-mark token) are the deploy's ``tmpfs`` images, numalab's machine
(lab.vm.qemu.qemu_argv.machine_args: accelerator, NUMA nodes, distances, CPUs) and the results share are the
job context's ``extra_options``, the boot is LAVA's ``qemu`` method, and a ``monitor`` test follows the guest
init's stage marks on the console (LAVA's judgement: a case a mark, its guest uptime as the measurement; the
run ends at the ``done`` or ``failed`` mark).

The share is a directory on the worker, named in the job (an absolute path): the job's results come back
when the worker is the machine that imports them (``lava-run`` here, or a worker whose job directory is
shared with numalab). docs/lava.md says what a LAVA lab needs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError
from lab.paths import json_text, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import plan_placement
from lab.run.prepare import Prepared, prepare
from lab.run.request import RunRequest, Trip
from lab.vm.backend import BootSpec
from lab.vm.qemu.qemu_argv import machine_args, share_args

# The console's lines in the dispatcher's log: "target" while an action reads the console, "feedback" for what it
# reads after the action ended (the guest's last lines, its done mark among them, can come so: seen under load)
CONSOLE_LEVELS = ("target", "feedback")
JOBSET = "jobset.json"  # the job set's spec (name, source, fingerprint) and shard
DONE_MARK = '"case": "job"'  # the dispatcher's last result line of a job (pass or fail): its log is whole
SIDECAR = "numalab-run.json"  # what the import needs of the run: its options, its boot, its token
JOB = "job.yaml"
DEVICE = "device.yaml"  # the device configuration lava-run takes (the dictionary rendered with the job's context)
LOG = "output.yaml"  # the job's log, as lava-run writes it to its standard error
STALLED_LOG = "output.stalled-{n}.yaml"  # the log of a job's attempt whose boot stalled (run-lava.sh)
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
    token: str  # the run's stage-mark token (its booted mark says the boot did not stall)


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


@dataclasses.dataclass(frozen=True)
class JobPlace:
    """Where a job sits in its set: the worker slot it is tagged for (``numalab-slot-N``), the A/B pair it belongs
    to and its order (the job's metadata)."""

    slot: int
    pair: str
    order: int


def monitor_timeout_s(req: RunRequest) -> int:
    """The job's boot, test and monitor timeouts: the run's (whole seconds, rounded up). The monitor's bounds its
    wait for the booted mark: a boot that stalls before init is found then (run-lava.sh runs the job again)."""
    return int(req.timeout()) + 1


def job_definition(req: RunRequest, run_id: str, prep: Prepared, extra: list[str], urls: tuple[str, str],
                   place: JobPlace) -> dict:  # fmt: skip
    """The LAVA job (a dict in the order LAVA's own examples have); ``urls``: its kernel's and its initrd's."""
    kernel_url, initrd_url = urls
    slot, pair, order = place.slot, place.pair, place.order
    if any(c in prep.boot.cmdline for c in '"\\'):  # (LAVA's command line is split as a shell would)
        raise LabError(f"run {run_id}: the kernel command line has a quote or a backslash, which LAVA's "
                       "-append \"...\" would not keep: leave it out of --append for LAVA")  # fmt: skip
    token = re.escape(prep.boot.stage_token)
    timeout = monitor_timeout_s(req)
    mark = rf"NUMALAB-STAGE {token} "
    return {
        "device_type": "qemu",
        "job_name": f"numalab {run_id}",
        "tags": [f"numalab-slot-{slot}"],
        "priority": "medium",
        "visibility": "public",
        "metadata": {"numalab.run": run_id, "numalab.pair": pair, "numalab.order": order},
        # (the monitor's connection timeout bounds its wait for the booted mark and between two marks: LAVA's own
        # 30 s was too short for a TCG boot under load, and for any workload longer than 30 s)
        "timeouts": {"job": {"seconds": timeout + 300}, "action": {"seconds": timeout},
                     "connections": {"lava-test-monitor": {"seconds": timeout}}},
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
        urls = _url(kernel, url_base, root), _url(Path(prep.boot.initrd), url_base, root)
        job = job_definition(req, run.id, prep, extra, urls, JobPlace(slot, pair, order))
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
        jobs.append(LavaJob(run.id, d.relative_to(root).as_posix(), slot, pair, prep.boot.stage_token))
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
        "# A job whose boot stalled (LAVA's monitor timed out before the guest init's booted mark: QEMU's",
        f"# multi-threaded TCG, rarely; docs/lava.md) runs once more, its log kept as {STALLED_LOG.format(n=1)},",
        "# as a direct run boots once more; lava-import names the stalled attempt in the run's manifest.",
        'set -u\ncd "$(dirname "$0")"\nrc=0',
        f'done_job() {{ [ -f "$1/{LOG}" ] && grep -q \'{DONE_MARK}\' "$1/{LOG}"; }}',
        f'stalled() {{ grep \'{DONE_MARK}\' "$1/{LOG}" | grep -q "timed out" && '
        f'! grep -q "NUMALAB-STAGE $2 booted [0-9]" "$1/{LOG}"; }}',  # (the mark, not the monitor's pattern)
        f'run_job() {{ rm -rf "$1/lava" "$1/share" && mkdir "$1/lava" && mkdir -m 700 "$1/share" && '
        f'lava-run --job-id "$2" --output-dir "$1/lava" --device "$1/{DEVICE}" "$1/{JOB}" '
        f'> "$1/lava-run.out" 2> "$1/{LOG}"; }}',
        "job() {  # its directory, its job id, its run's stage-mark token",
        '  done_job "$1" && return 0',
        f'  rm -f "$1"/{STALLED_LOG.format(n="*")}',
        '  run_job "$1" "$2" && return 0',
        '  stalled "$1" "$3" || return 1',
        '  echo "$1: the boot stalled before init; running the job once more" >&2',
        f'  mv "$1/{LOG}" "$1/{STALLED_LOG.format(n=1)}" && run_job "$1" "$2"',
        "}",
    ]
    for n, j in enumerate(jobs, 1):
        lines.append(f"job {shlex.quote(j.directory)} {n} {j.token} || rc=1")
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
  (what the import needs; the run's stage-mark token is in it, in the job and in run-lava.sh: keep them from
  the guest).
- `run-lava.sh`: every job with `lava-run` on this host, in order; each job's log lands in `jobs/NNN-RUN/{LOG}`
  (a job whose boot stalled before init runs once more, its first log kept as `{STALLED_LOG.format(n=1)}`).

Then `numalab matrix lava-import DIR --out RUNS` (DIR: this directory) makes a run record of each job, and
`numalab compare` / `numalab report` take them.
"""


# ---------------------------------------------------------------------------------------------- the import --

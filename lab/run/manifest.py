"""A run's manifest.json, built in one place.

What a run found out comes from many parts: the request, the VM backend's outcome, the guest's own
files, the trace, the access-matrix plugin. :mod:`lab.run.collect` gathers it into :class:`ManifestInputs`, in
pieces by what they describe (what was asked, the machine as it ran, how the run ended, what the guest said, the
record's files, the instruments' counts), and :func:`build` turns that into the manifest, whole, with its keys in
the order records have always had (``tests/golden/record/manifest.shape`` pins the layout down;
:class:`lab.analysis.record.RunRecord` reads it back). Nothing else adds or changes a key of a manifest before it
is written.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab import __version__
from lab.analysis.results import Unpacked
from lab.guest.settings import GuestSettings
from lab.kernel.resolve import Kernel
from lab.record_files import RUN_FORMAT
from lab.run.instrument import InstrumentResult
from lab.run.scheduler import fair_record
from lab.run.status import console_excerpt, panic_line
from lab.topology.model.topology import Topology
from lab.topology.predictions.kernel_view import predict
from lab.vm.console import VmOutcome
from lab.vm.hang import symbolize
from lab.vm.qemu.firmware import firmware_name
from lab.vm.tcg.machine_model import model_record

FORMAT = RUN_FORMAT  # (lab.record_files: the readers check it)


@dataclass(frozen=True)
class GuestImage:
    """Which programs and tools the guest's initramfs had (lab.guest.image)."""

    tools: tuple[str, ...]
    programs: tuple[str, ...]
    initrd_bytes: int
    user: dict | None = None  # a user's workload: its files, tools and layer size (lab.run.prepare)


@dataclass(frozen=True)
class GuestView:
    """What the guest said about itself, and how it compares with the spec (lab.analysis.readback)."""

    readback: dict | None
    sched_domains: dict
    problems: list[str]
    kernel_complaints: list
    sched_groups: dict
    sched_cache: dict = field(default_factory=dict)  # 7.x's cache-aware scheduling (lab.analysis.sched_cache)


@dataclass(frozen=True)
class RunAsked:
    """What the run was asked for (lab.run.request.RunRequest): its name and label, the machine, the kernel, the
    workload and the guest's settings."""

    run_id: str
    label: str
    topology: Topology
    kernel: Kernel
    workload_name: str
    settings: GuestSettings


@dataclass(frozen=True)
class RunMachine:
    """The machine as it ran: the accelerator and the guest's clock, where its vCPUs and memory were placed, what
    the backend said, and how it booted (the boot protocol, the firmware, the guest image)."""

    accel: str
    accel_reason: str
    clock: dict  # lab.vm.tcg.guest_clock.GuestClock.to_dict()
    placement: dict  # lab.placement.pinning.Placement.to_dict()
    backend_info: dict
    boot_protocol: str
    firmware_rom: str  # "" for QEMU's default firmware
    firmware_choice: str
    guest_image: GuestImage


@dataclass(frozen=True)
class RunEnd:
    """How the run ended: the VM's outcome, the run's status and reason (lab.run.status.classify), its time against
    its timeout, and the boots given up before the one that counted."""

    outcome: VmOutcome
    status: str  # lab.run.status.classify
    reason: str
    total_s: float
    timeout_s: float
    stalled_boots: tuple[dict, ...] = ()  # earlier boots of this run given up at the boot deadline (lab.run.boot)


@dataclass(frozen=True)
class GuestSaid:
    """What the guest said: its kernel's release and build-id, the knobs it read back, its view of the topology,
    the clocksource it settled on, the workload's result and exit code, and the scheduler it ran under."""

    release: str | None
    build_id: str | None
    knobs_readback: list[str]
    topology: GuestView
    workload_result: dict | None
    workload_rc: int | None
    workload_user: dict | None = None  # a user's workload: {"spec": ..., "metrics": [declarations]} (lab.run.collect)
    clocksource: str | None = None  # the clocksource the guest kernel settled on (dmesg-boot.txt)
    scheduler: dict | None = None  # --scheduler: asked, kind, binary, and the guest's word (lab.run.scheduler)


@dataclass(frozen=True)
class RecordFiles:
    """The run record's files: their names, the share the guest sent them through and its limits, the unpacked
    tars, the console, and the guest's files that could not be read."""

    files: list[str]  # the record's files when it was collected
    share: dict  # lab.vm.share.inventory
    limits: dict  # lab.vm.share.ShareLimits, as a dict
    unpacked: Unpacked
    console: str
    data_problems: tuple[str, ...] = ()  # the guest's files that could not be read (lab.run.collect._guarded)


@dataclass(frozen=True)
class Instruments:
    """What the instruments measured: the trace's and vmstat's metrics (lab.analysis.metrics) and the TCG plugin's
    counts, each of its instruments' section (lab.run.instrument), in the manifest's order."""

    metrics: dict
    plugin: tuple[InstrumentResult, ...] = ()


@dataclass(frozen=True)
class ManifestInputs:
    """Everything a run's manifest is built from (:func:`build`), in pieces by what they describe."""

    asked: RunAsked
    machine: RunMachine
    end: RunEnd
    guest: GuestSaid
    record: RecordFiles
    instruments: Instruments


def workload_seconds(outcome: VmOutcome, host: bool = False) -> float | None:
    """The workload's time by the guest's clock between the init's stage marks (None if it did not run, or if
    the host's clock contradicts either mark: lab.vm.console.check_marks); ``host``: by the host's clock
    when the marks arrived."""
    ws, we = outcome.stage("workload-start"), outcome.stage("workload-end")
    if not ws or not we or ws.contradicted or we.contradicted:
        return None
    if host:
        return we.host_s - ws.host_s
    return (we.guest_uptime - ws.guest_uptime) if ws.guest_uptime and we.guest_uptime else None


def system_map(kernel: Kernel) -> Path | None:
    """The kernel's System.map, where the stock kernel cache and numalab's builds keep it (beside the image)."""
    path = Path(kernel.image).parent / "System.map"
    return path if path.is_file() else None


def _kernel_entry(i: ManifestInputs) -> dict:
    """The kernel asked for, what the guest said it runs, and whether the two are one binary: ``identity`` is
    verified (the guest's build-id is the build's), mismatch (status kernel-mismatch) or unverified (the
    image has no readable build-id, or the guest never booted)."""
    entry = i.asked.kernel.to_dict()
    expected = entry["expected_build_id"]
    identity = "unverified"  # the image's or the guest's build-id could not be read (the latter: a data problem)
    guest = i.guest
    if expected and guest.build_id:
        identity = "verified" if guest.build_id == expected else "mismatch"
    return entry | {"guest_release": guest.release, "build_id": guest.build_id, "identity": identity,
                    "boot_protocol": i.machine.boot_protocol}  # fmt: skip


def accel_differences(argv: list[str], clocksource: str | None) -> dict:
    """What a run's accelerator changes besides speed: QEMU's -cpu model (KVM: the host's CPU; TCG: QEMU's
    default or the one asked for), the clocksource the guest settled on (kvm-clock under KVM; tsc, made
    reliable by numalab's TCG arguments, under TCG) and the TCG timing arguments on its command line."""
    cpu = argv[argv.index("-cpu") + 1] if "-cpu" in argv[:-1] else "qemu64 (QEMU's default)"
    append = argv[argv.index("-append") + 1] if "-append" in argv[:-1] else ""
    tcg_args = [a for a in append.split() if a.split("=", 1)[0] in ("tsc", "tsc_early_khz", "no_timer_check", "lpj")]
    return {"cpu": cpu, "guest_clocksource": clocksource, "tcg_timing_args": tcg_args}


def clocksource_of(dmesg: str) -> str | None:
    """The last ``clocksource: Switched to clocksource X`` of a boot log."""
    found = re.findall(r"Switched to clocksource (\S+)", dmesg)
    return found[-1] if found else None


def build(i: ManifestInputs) -> dict:
    """The manifest of one run, as written to manifest.json."""
    asked, machine, end, guest, record = i.asked, i.machine, i.end, i.guest, i.record
    booted = end.outcome.stage("booted")
    workload_s = workload_seconds(end.outcome)
    manifest = {
        "format": FORMAT,
        "run_id": asked.run_id,
        "label": asked.label,
        "status": end.status,
        "reason": end.reason,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "numalab": __version__,
        "topology": asked.topology.to_dict() | {"kernel_view": predict(asked.topology)},
        "kernel": _kernel_entry(i),
        "workload": {
            "name": asked.workload_name,
            "command": asked.settings.workload_cmd,
            "duration_s": asked.settings.duration_s,
            "result": guest.workload_result,
            "exit_code": guest.workload_rc,
        }
        | (guest.workload_user or {}),
        "settings": asked.settings.to_dict() | {"readback": guest.knobs_readback},
        "scheduler": guest.scheduler or fair_record(),
        "accelerator": {"name": machine.accel, "reason": machine.accel_reason, "clock": machine.clock}
        | accel_differences(machine.backend_info.get("argv") or [], guest.clocksource),
        # (check: whether the plan held over the workload window, read from outside QEMU: lab.vm.placement_watch)
        "placement": machine.placement
        | {"pinned": end.outcome.pinned, "pin_error": end.outcome.pin_error, "check": end.outcome.placement_check},
        "backend": machine.backend_info,
        "timings": {
            "boot_s": round(booted.host_s, 2) if booted else None,
            "boot_guest_uptime_s": booted.guest_uptime if booted else None,
            "workload_s": round(workload_s, 2) if workload_s is not None else None,
            "workload_host_s": round(host_s, 2)
            if (host_s := workload_seconds(end.outcome, host=True)) is not None
            else None,  # the same window by the host's clock (the marks' arrival), which bounds it
            "vm_s": round(end.outcome.wall_s, 2),
            "total_s": round(end.total_s, 2),
            "timeout_s": end.timeout_s,
        },
        # The vCPU threads' CPU time and wait to run over the workload window (lab.vm.vcpu_time); the
        # ``*_per_vcpu_s`` metrics divide the workload's work by its run_s (lab.analysis.metrics).
        "vcpu_time": end.outcome.vcpu_time,
        "guest_topology_ok": end.status != "topology-mismatch" and booted is not None and not guest.topology.problems,
        "guest_topology": {
            "readback": guest.topology.readback,
            "problems": guest.topology.problems,
            "sched_domains": guest.topology.sched_domains,
            "kernel_complaints": guest.topology.kernel_complaints,  # what the guest kernel logged against its topology
            "sched_groups": guest.topology.sched_groups,
            "sched_cache": guest.topology.sched_cache,  # what the kernel said of cache-aware scheduling, and its knobs
        },
        "stages": [
            {"name": s.name, "detail": s.detail, "host_s": round(s.host_s, 2), "uptime": s.guest_uptime}
            | ({"contradicted": True} if s.contradicted else {})
            for s in end.outcome.stages
        ],
        "metrics": i.instruments.metrics,
        "files": sorted(record.files),
        "guest_share": record.share | {"limits": record.limits, "unpacked_bytes": record.unpacked.bytes},
    }
    _add_problems(manifest, i)
    _add_boot_facts(manifest, i)
    # the modelled machine the run had, by name, and where it differs from it (lab.vm.tcg.machine_model); a run
    # with no memory charge under the guest's clock has none
    if (model := model_record(manifest)) is not None:
        manifest["model"] = model
    return manifest


def _add_problems(manifest: dict, i: ManifestInputs) -> None:
    """The keys only a run with something to say about itself has: damage, stalls, a hang, a panic."""
    end, record = i.end, i.record
    if i.instruments.metrics.get("trace_incomplete"):
        manifest["trace_incomplete"] = True  # compare leaves the run out unless asked (lab.analysis.lost)
    if record.unpacked.problems:
        manifest["unpack_problems"] = record.unpacked.problems
    if record.data_problems:
        manifest["guest_data_problems"] = list(record.data_problems)
    smap = system_map(i.asked.kernel)
    if end.stalled_boots:
        manifest["stalled_boots"] = [
            sb | {"vm_at_timeout": symbolize(sb["vm_at_timeout"], smap) if sb.get("vm_at_timeout") else None}
            for sb in end.stalled_boots
        ]
    if end.outcome.hang_state:
        manifest["vm_at_timeout"] = symbolize(end.outcome.hang_state, smap)
    if end.status != "ok":
        manifest["console_tail"] = console_excerpt(record.console, end.status)
    if end.status != "panic" and (hint := panic_line(record.console)):
        # A panic line the kernel did not confirm through pvpanic: guest userspace can print one.
        manifest["panic_hint"] = {"console": hint, "pvpanic": False}


def _add_boot_facts(manifest: dict, i: ManifestInputs) -> None:
    """The plugins' counts, the firmware and what the guest image carried."""
    machine, image = i.machine, i.machine.guest_image
    for result in i.instruments.plugin:
        add_instrument(manifest, result)
    manifest["firmware"] = {
        "name": firmware_name(machine.firmware_rom),
        "rom": machine.firmware_rom or None,
        "choice": machine.firmware_choice,
    }
    manifest["guest_image"] = {
        "tools": list(image.tools),
        "programs": list(image.programs),
        "initrd_bytes": image.initrd_bytes,
    }
    if image.user is not None:
        manifest["guest_image"]["user"] = image.user


def add_instrument(manifest: dict, result: InstrumentResult) -> None:
    """An instrument's part of a manifest (lab.run.instrument; for :func:`build`, and the instruments' tests)."""
    manifest[result.key] = result.section
    manifest["files"] = sorted({*manifest.get("files", []), *result.files})
    # Only an otherwise good run is failed: a panic or a timeout says more than missing counts.
    if result.failure and manifest.get("status") == "ok":
        manifest["status"], manifest["reason"] = result.failure

"""A run's manifest.json, built in one place.

What a run found out comes from many parts: the request, the VM backend's outcome, the guest's own
files, the trace, the access-matrix plugin. :mod:`lab.run.collect` gathers it into :class:`ManifestInputs`
and :func:`build` turns that into the manifest, whole, with its keys in the order records have always
had (``tests/golden/record/manifest.shape`` pins the layout down; :class:`lab.analysis.record.RunRecord`
reads it back). Nothing else adds or changes a key of a manifest before it is written.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from lab import __version__
from lab.analysis.results import Unpacked
from lab.guest.init_plan import GuestPlan
from lab.kernel.resolve import Kernel
from lab.record_files import RUN_FORMAT
from lab.run.access_matrix import AccessResult
from lab.run.scheduler import fair_record
from lab.topology.kernel_view import predict
from lab.topology.model import Topology
from lab.vm.console import VmOutcome
from lab.vm.hang import symbolize
from lab.vm.qemu.firmware import firmware_name
from lab.vm.status import console_excerpt, panic_line
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
class ManifestInputs:
    run_id: str
    label: str
    topology: Topology
    kernel: Kernel
    workload_name: str
    plan: GuestPlan
    accel: str
    accel_reason: str
    clock: dict  # lab.vm.tcg.guest_clock.GuestClock.to_dict()
    placement: dict  # lab.placement.pinning.Placement.to_dict()
    backend_info: dict
    outcome: VmOutcome
    status: str  # lab.vm.status.classify
    reason: str
    total_s: float
    timeout_s: float
    workload_result: dict | None
    workload_rc: int | None
    guest_release: str | None
    build_id: str | None
    knobs_readback: list[str]
    guest: GuestView
    metrics: dict
    files: list[str]  # the record's files when it was collected
    share: dict  # lab.vm.share.inventory
    limits: dict  # lab.vm.share.ShareLimits, as a dict
    unpacked: Unpacked
    console: str
    boot_protocol: str
    firmware_rom: str  # "" for QEMU's default firmware
    firmware_choice: str
    guest_image: GuestImage
    access: AccessResult | None = None  # --access-matrix
    latency: AccessResult | None = None  # --remote-latency (lab.run.remote_latency)
    stalled_boots: tuple[dict, ...] = ()  # earlier boots of this run given up at the boot deadline (lab.run.boot)
    data_problems: tuple[str, ...] = ()  # the guest's files that could not be read (lab.run.collect._guarded)
    workload_user: dict | None = None  # a user's workload: {"spec": ..., "metrics": [declarations]} (lab.run.collect)
    guest_clocksource: str | None = None  # the clocksource the guest kernel settled on (dmesg-boot.txt)
    scheduler: dict | None = None  # --scheduler: asked, kind, binary, and the guest's word (lab.run.scheduler)


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
    entry = i.kernel.to_dict()
    expected = entry["expected_build_id"]
    identity = "unverified"  # the image's or the guest's build-id could not be read (the latter: a data problem)
    if expected and i.build_id:
        identity = "verified" if i.build_id == expected else "mismatch"
    return entry | {"guest_release": i.guest_release, "build_id": i.build_id, "identity": identity,
                    "boot_protocol": i.boot_protocol}  # fmt: skip


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
    booted = i.outcome.stage("booted")
    workload_s = workload_seconds(i.outcome)
    manifest = {
        "format": FORMAT,
        "run_id": i.run_id,
        "label": i.label,
        "status": i.status,
        "reason": i.reason,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "numalab": __version__,
        "topology": i.topology.to_dict() | {"kernel_view": predict(i.topology)},
        "kernel": _kernel_entry(i),
        "workload": {
            "name": i.workload_name,
            "command": i.plan.workload_cmd,
            "duration_s": i.plan.duration_s,
            "result": i.workload_result,
            "exit_code": i.workload_rc,
        }
        | (i.workload_user or {}),
        "settings": i.plan.to_dict() | {"readback": i.knobs_readback},
        "scheduler": i.scheduler or fair_record(),
        "accelerator": {"name": i.accel, "reason": i.accel_reason, "clock": i.clock}
        | accel_differences(i.backend_info.get("argv") or [], i.guest_clocksource),
        # (check: whether the plan held over the workload window, read from outside QEMU: lab.vm.placement_watch)
        "placement": i.placement
        | {"pinned": i.outcome.pinned, "pin_error": i.outcome.pin_error, "check": i.outcome.placement_check},
        "backend": i.backend_info,
        "timings": {
            "boot_s": round(booted.host_s, 2) if booted else None,
            "boot_guest_uptime_s": booted.guest_uptime if booted else None,
            "workload_s": round(workload_s, 2) if workload_s is not None else None,
            "workload_host_s": round(host_s, 2)
            if (host_s := workload_seconds(i.outcome, host=True)) is not None
            else None,  # the same window by the host's clock (the marks' arrival), which bounds it
            "vm_s": round(i.outcome.wall_s, 2),
            "total_s": round(i.total_s, 2),
            "timeout_s": i.timeout_s,
        },
        # The vCPU threads' CPU time and wait to run over the workload window (lab.vm.vcpu_time); the
        # ``*_per_vcpu_s`` metrics divide the workload's work by its run_s (lab.analysis.metrics).
        "vcpu_time": i.outcome.vcpu_time,
        "guest_topology_ok": i.status != "topology-mismatch" and booted is not None and not i.guest.problems,
        "guest_topology": {
            "readback": i.guest.readback,
            "problems": i.guest.problems,
            "sched_domains": i.guest.sched_domains,
            "kernel_complaints": i.guest.kernel_complaints,  # what the guest kernel logged against its topology
            "sched_groups": i.guest.sched_groups,
            "sched_cache": i.guest.sched_cache,  # what the kernel said of cache-aware scheduling, and its knobs
        },
        "stages": [
            {"name": s.name, "detail": s.detail, "host_s": round(s.host_s, 2), "uptime": s.guest_uptime}
            | ({"contradicted": True} if s.contradicted else {})
            for s in i.outcome.stages
        ],
        "metrics": i.metrics,
        "files": sorted(i.files),
        "guest_share": i.share | {"limits": i.limits, "unpacked_bytes": i.unpacked.bytes},
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
    if i.metrics.get("trace_incomplete"):
        manifest["trace_incomplete"] = True  # compare leaves the run out unless asked (lab.analysis.lost)
    if i.unpacked.problems:
        manifest["unpack_problems"] = i.unpacked.problems
    if i.data_problems:
        manifest["guest_data_problems"] = list(i.data_problems)
    smap = system_map(i.kernel)
    if i.stalled_boots:
        manifest["stalled_boots"] = [
            sb | {"vm_at_timeout": symbolize(sb["vm_at_timeout"], smap) if sb.get("vm_at_timeout") else None}
            for sb in i.stalled_boots
        ]
    if i.outcome.hang_state:
        manifest["vm_at_timeout"] = symbolize(i.outcome.hang_state, smap)
    if i.status != "ok":
        manifest["console_tail"] = console_excerpt(i.console, i.status)
    if i.status != "panic" and (hint := panic_line(i.console)):
        # A panic line the kernel did not confirm through pvpanic: guest userspace can print one.
        manifest["panic_hint"] = {"console": hint, "pvpanic": False}


def _add_boot_facts(manifest: dict, i: ManifestInputs) -> None:
    """The plugins' counts, the firmware and what the guest image carried."""
    if i.access is not None:
        add_access(manifest, i.access)
    if i.latency is not None:
        add_access(manifest, i.latency, "remote_latency")
    manifest["firmware"] = {
        "name": firmware_name(i.firmware_rom),
        "rom": i.firmware_rom or None,
        "choice": i.firmware_choice,
    }
    manifest["guest_image"] = {
        "tools": list(i.guest_image.tools),
        "programs": list(i.guest_image.programs),
        "initrd_bytes": i.guest_image.initrd_bytes,
    }
    if i.guest_image.user is not None:
        manifest["guest_image"]["user"] = i.guest_image.user


def add_access(manifest: dict, access: AccessResult, key: str = "access_matrix") -> None:
    """The access matrix's (or the remote latency's) part of a manifest (for :func:`build`, and the tests of
    lab.run.access_matrix)."""
    manifest[key] = access.section
    manifest["files"] = sorted({*manifest.get("files", []), *access.files})
    # Only an otherwise good run is failed: a panic or a timeout says more than missing counts.
    if access.failure and manifest.get("status") == "ok":
        manifest["status"], manifest["reason"] = access.failure

"""One run: topology + kernel + workload -> a complete run record on the host.

The record is written into ``.<id>.partial`` next to its final place and
renamed when complete, so a directory without the dot is always whole.
"""

from __future__ import annotations

import errno
import functools
import os
import secrets
import shutil
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from lab.analysis import plausible
from lab.analysis.cpu_readback import check_cpus, read_cpus
from lab.analysis.display import percent
from lab.analysis.kernel_complaints import read_complaints
from lab.analysis.kernel_complaints import summary as complaint_line
from lab.analysis.lost import describe as describe_lost
from lab.analysis.lost import is_incomplete
from lab.analysis.metrics import METRIC_KEYS, per_vcpu_second, run_metrics
from lab.analysis.node_cpu import node_cpu_time
from lab.analysis.readback import build_id, check_topology, read_sched_domains, read_topology
from lab.analysis.results import Unpacked, unpack_results
from lab.errors import LabError
from lab.guest import image
from lab.guest.init_plan import GuestPlan
from lab.guest.sched_verbose import check_groups, groups_record, read_sched_groups
from lab.kernel.pvh import boot_image
from lab.kernel.resolve import Kernel
from lab.paths import json_text, run_scratch, utf8_path, write_text_atomic
from lab.placement.host_inventory import read_inventory
from lab.placement.pinning import Backing, plan_placement
from lab.record_files import (
    CONSOLE_LOG,
    DMESG_BOOT,
    KERNEL_NOTES,
    KNOBS,
    MANIFEST,
    READBACK_TAR,
    TRACE_RECORD_RC,
    UNAME,
    WORKLOAD_OUT,
    WORKLOAD_RC,
)
from lab.run import access_matrix as access_run
from lab.run import remote_latency as latency_run
from lab.run.access_matrix import AccessResult
from lab.run.collect_limit import COLLECT_LIMIT_S, NO_LIMIT, CollectLimit, CollectOverrun
from lab.run.manifest import GuestImage, GuestView, ManifestInputs, clocksource_of, workload_seconds
from lab.run.manifest import build as build_manifest
from lab.topology.cpu_view import ALL_LEVELS, configured_levels
from lab.topology.model import Topology
from lab.topology.tiers import kernel_args as tier_kernel_args
from lab.trace.assemble import assemble_run
from lab.untrusted import finite_copy, read_guest_text, term_safe, to_int
from lab.vm.backend import Backend, VmRequest
from lab.vm.console import SLACK_S, Stage, check_marks
from lab.vm.hang import describe as describe_hang
from lab.vm.qemu.qemu_argv import BootSpec
from lab.vm.qemu.qemu_backend import QemuBackend
from lab.vm.share import DEFAULT_OUTPUT_LIMIT, ShareLimits, guest_done, inventory, make_share
from lab.vm.status import Evidence, classify
from lab.vm.tcg import tcg_boot
from lab.vm.tcg.guest_clock import GuestClock
from lab.vm.tcg.latency_model import LatencyModel
from lab.workloads import image_layers
from lab.workloads.registry import SECONDS_METRICS
from lab.workloads.workload_output import parse_output
from lab.workloads.workload_type import Workload

BOOT_ALLOWANCE_S = 60.0  # TCG boot of a large guest on a small host
BOOT_ATTEMPTS = 2  # under TCG: one more boot when the first stalls before init (boot_deadline)
COLLECT_ALLOWANCE_S = 60.0  # trace-cmd merging + copying results
VIRTUAL_CLOCK_SCALE = 12.0  # host seconds a guest second may take under --clock virtual


class Interrupted(BaseException):
    """SIGTERM/SIGINT during a run. A BaseException, as KeyboardInterrupt is: the nets that keep a guest's bad
    file from stopping a run (``_guarded``: ``except Exception``) must not swallow the user's signal."""


@dataclass(frozen=True)
class RunRequest:
    topology: Topology
    kernel: Kernel
    workload: Workload
    plan: GuestPlan
    accel: str
    accel_reason: str = ""
    backing: Backing = field(default_factory=Backing)
    out: Path | None = None
    runs_root: Path = Path("runs")
    timeout_s: float | None = None
    label: str = ""
    backend: Backend = field(default_factory=QemuBackend)
    pinning: str = "auto"  # lab.placement.pinning.PINNINGS
    firmware: str = "auto"  # lab.vm.qemu.firmware.FIRMWARES
    guest_output_limit: int | None = None  # bytes the guest may send (lab.vm.share); None: the default
    access_sample: int = 0  # --access-matrix: count every Nth guest memory access by node (0: off)
    access_map: str = ""  # the plugin's address map; "" chooses it from the QEMU version
    boot_deadline_s: float | None = None  # TCG: None for the default (boot_deadline), 0 for never
    clock: GuestClock = GuestClock()  # the guest's clock (lab.vm.tcg.guest_clock): the host's, or instructions
    latency: LatencyModel | None = None  # --remote-latency: what remote misses cost (the same plugin)
    # Seconds the KVM probe's 1-vCPU guest took to boot and power off (lab.host.accel), 0 when not probed: a
    # KVM that is slow to boot (nested KVM, at TCG's speed) gets a boot allowance and a stage-mark slack to match.
    kvm_probe_s: float = 0.0

    def limits(self) -> ShareLimits:
        """What the guest may send: ``guest_output_limit`` if given; else 1 GiB, or more if full trace
        buffers need it (every vCPU's, twice: the raw pages and their tar, plus 256 MiB for the rest)."""
        # The tars' files: the init's few dozen, and numalab-tracegrab's one a vCPU plus the event formats
        # (a few hundred); 1024 + 4 a vCPU leaves room for both, and a tar of 5,000 files from 2 vCPUs is refused.
        members = 1024 + 4 * self.topology.total_cpus
        if self.guest_output_limit is not None:
            return ShareLimits(output_bytes=self.guest_output_limit, tar_members=members)
        trace = 2 * self.topology.total_cpus * self.plan.trace_buffer_kb * 1024 if self.plan.trace_events else 0
        return ShareLimits(output_bytes=max(DEFAULT_OUTPUT_LIMIT, trace + (256 << 20)), tar_members=members)

    def boot_deadline(self) -> float | None:
        """Under TCG, how long the guest init may take to report "booted" before QEMU is stopped and the
        VM booted once more: the boot allowance of the default timeout (60 s + 2 s per vCPU, where an
        idle 8-vCPU boot takes 3-6 s here). None: no deadline (KVM, --boot-deadline 0, or a deadline
        that would not come before the run's timeout).

        Why: QEMU 7.2's multi-threaded TCG here rarely stops running vCPUs during boot (once in each of
        3 of 5 full test-suite runs): every vCPU's RIP at a function's first instruction, none halted,
        nothing printed; or the other vCPUs spinning in stop_machine waiting for one. The second boot
        is a fresh QEMU process; the stalled one is kept in the manifest. (That a second boot after a
        real stall goes through is expected, not yet seen: no stall has come since the deadline.)"""
        if self.accel != "tcg" or self.boot_deadline_s == 0:
            return None
        deadline = self.boot_deadline_s or self._boot_allowance()
        return deadline if deadline < self.timeout() else None

    def _boot_allowance(self) -> float:
        """60 s + 2 s per vCPU; twice that under the virtual clock, whose one host thread runs every vCPU
        (a 4-vCPU boot took 26-36 s against 14 s multi-threaded, on QEMU 10 with the host loaded)."""
        allowance = BOOT_ALLOWANCE_S + 2 * self.topology.total_cpus
        if self.accel == "kvm":
            # (under nested KVM the probe took 41 s and an idle ring-4 boot 58-162 s, by the host's load)
            allowance += 4 * self.kvm_probe_s * max(1, self.topology.total_cpus // 2)
        return 2 * allowance if self.clock.virtual else allowance

    def mark_slack_s(self) -> float:
        """The fixed part of the stage marks' slack (lab.vm.console.check_marks): 2 s, more under a KVM whose
        probe boot was slow (nested KVM's console lines reach the host seconds late)."""
        return SLACK_S + (self.kvm_probe_s / 2 if self.accel == "kvm" and self.kvm_probe_s > 5 else 0.0)

    def collect_limit(self) -> float:
        """Host seconds the collection of the guest's results may take once the VM has ended (unpacking,
        the trace, every reader: lab.run.collect_limit), apart from the VM's own timeout: 300 s, or the
        VM's timeout when that is longer (a large guest's trace takes longer to read)."""
        return max(COLLECT_LIMIT_S, self.timeout())

    def timeout(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        # Under the virtual clock a guest second is 1 G instructions, run by one host thread: several host seconds.
        scale = 1.0 if self.accel == "kvm" else VIRTUAL_CLOCK_SCALE if self.clock.virtual else 1.5
        return self._boot_allowance() + self.plan.duration_s * scale + COLLECT_ALLOWANCE_S


def _run_id(req: RunRequest) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{stamp}-{req.topology.name}-{req.kernel.name}-{req.workload.name}-{secrets.token_hex(2)}"


def _read(path: Path) -> str:
    return read_guest_text(path) or ""


def _int_file(path: Path) -> int | None:
    return to_int(read_guest_text(path) or "")


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
    placement = plan_placement(req.topology, read_inventory(), req.backing, pinning=req.pinning)
    run_id = _run_id(req)
    final = req.out if req.out else req.runs_root / run_id
    partial = _prepare_out(final, given=bool(req.out))
    old_handlers = _install_signal_handlers()
    try:
        with run_scratch() as tmp:
            manifest = _execute(req, progress, placement, run_id, partial, tmp)
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


def kernel_cmdline(plan: GuestPlan, topo: Topology, tcg_args: str = "") -> str:
    """The guest kernel's whole command line: the plan's, the memory tiers' (lab.topology.tiers), then the
    TCG arguments (lab.vm.tcg.tcg_boot; they depend on the host, so the golden files leave them out)."""
    return " ".join([plan.cmdline(), *tier_kernel_args(topo), *([tcg_args] if tcg_args else [])])


@dataclass
class Prepared:
    """What the prepare stage hands the boot stage: the guest's image and how QEMU boots it."""

    boot: BootSpec
    share: Path
    initrd: Path
    protocol: str
    firmware: str
    tsc_host: str
    tools: list[str]
    programs: list
    access: object | None  # lab.run.access_matrix's setup, when the access-matrix plugin runs (or --remote-latency)
    user: dict | None = None  # a user's workload's layer: its files, tools and size


@dataclass
class Booted:
    """What the boot stage hands the collect stage: how the VM ended and when the workload ran."""

    outcome: object  # lab.vm.status.VmOutcome
    backend_info: dict
    share: Path  # (a stalled boot's re-boot gets a fresh share)
    boot: BootSpec
    stalled: list[dict]
    workload_start_ns: int | None = None
    workload_end_ns: int | None = None


def _execute(req: RunRequest, progress, placement, run_id: str, partial: Path, tmp: Path) -> dict:
    # Progress lines carry the guest's words (stage details): escaped before they reach a terminal.
    say = (lambda msg: progress(term_safe(msg))) if progress else (lambda _msg: None)
    t_total = time.monotonic()
    prep = _prepare(req, run_id, partial, tmp, say)
    booted = _boot(req, placement, prep, partial, tmp, say)
    return _finish(req, run_id, partial, placement, prep, booted, t_total, say)


def _prepare(req: RunRequest, run_id: str, partial: Path, tmp: Path, say: Callable[[str], None]) -> Prepared:
    """Stage 1: the guest image (initrd layers), the kernel command line, the firmware and the plugin."""
    say("building guest image")
    boot_kernel, protocol = boot_image(req.kernel.image)
    tsc_host = req.backend.host_id  # a remote libvirt host has its own TSC frequency
    tcg_args = tcg_boot.boot_args(req.kernel.image, req.accel, tsc_host, req.clock.virtual)
    cmdline = kernel_cmdline(req.plan, req.topology, " ".join(filter(None, (tcg_args, req.clock.kernel_args()))))
    firmware = req.backend.firmware_rom(req.firmware)
    tools = image_layers.tools_for(req.workload, req.plan.trace_mode, bool(req.plan.trace_events))
    programs = image_layers.programs_for(req.workload)
    layers = [
        image.base_image(),
        image.workload_image(programs),
        user_layer := image_layers.user_layer(req.workload.user),
        *map(image_layers.tool_layer, tools),
        image.modules_image(req.kernel.modules_dir, image.tier_modules(req.topology)),
    ]
    token = secrets.token_hex(16)  # this boot's stage-mark token (lab.vm.console; docs/security.md)
    initrd = image.assemble_initrd(tmp / "initrd.cpio", layers, req.plan.to_shell(), token)
    access = None
    if req.access_sample or req.latency:
        qemu = req.backend.emulator_version()
        latency = latency_run.plugin_latency(req.latency, tmp) if req.latency else None
        access = access_run.setup(req.topology, req.access_sample, tmp, qemu, req.access_map, latency)
    share = make_share(tmp)
    boot = BootSpec(
        kernel=str(boot_kernel),
        initrd=str(initrd),
        cmdline=cmdline,
        results_dir=str(share),
        console_log=str((partial / CONSOLE_LOG).resolve()),
        qmp_socket=str(tmp / "qmp.sock"),
        accel=req.accel,
        name=f"numalab-{run_id}",
        firmware=firmware,
        plugin=access.argument if access else "",
        clock=req.clock,
        stage_token=token,
    )
    user = _user_image_facts(req.workload, user_layer)
    return Prepared(boot, share, initrd, protocol, firmware, tsc_host, list(tools), list(programs), access, user)


def _user_image_facts(workload: Workload, layer: Path | None) -> dict | None:
    """What a user's workload carried into the guest (the manifest's ``guest_image.user``)."""
    if workload.user is None or layer is None:
        return None
    spec = workload.user
    return {"files": [f"/workload/{g}" for _, g in spec.files], "tools": list(spec.tools),
            "packages": list(spec.packages), "layer_bytes": layer.stat().st_size}  # fmt: skip


def _boot(req: RunRequest, placement, prep: Prepared, partial: Path, tmp: Path, say: Callable[[str], None]) -> Booted:
    """Stage 2: the VM runs the plan; a boot that stalls before init (TCG) is booted once more."""
    say(f"booting {req.topology.name} ({req.topology.total_cpus} vCPUs, {req.accel})")
    duration = req.plan.duration_s
    state = {"workload_start": None, "last_tick": 0.0}

    def on_stage(st: Stage) -> None:
        if st.name == "booted":
            say(f"booted in {st.host_s:.1f}s")
        elif st.name == "workload-start":
            state["workload_start"] = st.host_s
            state["workload_start_ns"] = time.monotonic_ns()
            say(f"running {req.workload.name} for {duration:g}s")
        elif st.name == "workload-end":
            state["workload_end_ns"] = time.monotonic_ns()
            say(f"collecting (workload exit {st.detail or '?'})")
        elif st.name == "failed":
            say(f"guest failed: {st.detail}")

    def on_tick(now: float) -> None:
        start = state["workload_start"]
        if start is not None and now - state["last_tick"] >= 5 and now - start < duration:
            state["last_tick"] = now
            say(f"running {now - start:.0f}/{duration:g}s")

    limits = req.limits()
    deadline = req.boot_deadline()
    stalled: list[dict] = []
    boot, share = prep.boot, prep.share
    for attempt in range(1, BOOT_ATTEMPTS + 1):
        last = attempt == BOOT_ATTEMPTS
        vm = VmRequest(req.topology, placement, boot, partial, req.timeout(), on_stage, on_tick, limits,
                       boot_deadline_s=None if last else deadline)  # fmt: skip
        outcome, backend_info = req.backend.run(vm)
        if not outcome.boot_stalled:
            break
        where = describe_hang(outcome.hang_state)
        stalled.append({
            "attempt": attempt, "deadline_s": deadline, "vm_s": round(outcome.wall_s, 2),
            "vm_at_timeout": outcome.hang_state, "console_tail": _read(partial / CONSOLE_LOG).splitlines()[-20:],
        })  # fmt: skip
        say(f"boot attempt {attempt} stalled: no init after {deadline:.0f}s ({where}); booting again")
        shutil.rmtree(share)  # (the guest never reached init: nothing of its is in it)
        share = make_share(tmp)
        boot = replace(boot, cmdline=f"{boot.cmdline} numalab.boot_attempt={attempt + 1}")
    if outcome.limit:
        say(f"stopped the guest: {outcome.limit}")
    return Booted(outcome, backend_info, share, boot, stalled, state.get("workload_start_ns"),
                  state.get("workload_end_ns"))  # fmt: skip


def _finish(
    req: RunRequest, run_id: str, partial: Path, placement, prep: Prepared, booted: Booted, t_total: float,
    say: Callable[[str], None],
) -> dict:  # fmt: skip
    """Stage 3: the guest's files unpacked and checked, the manifest built and written."""
    limits = req.limits()
    limit = CollectLimit(req.collect_limit())  # the host's own limit on reading what the guest sent
    with limit.armed():
        manifest = _collect_bounded(req, run_id, partial, placement, prep, booted, t_total, limits, limit)
    manifest, nonfinite = finite_copy(manifest)
    if nonfinite:  # (the readers refuse them; this is the net under them: the record stays strict JSON)
        manifest["nonfinite_values"] = nonfinite
    write_text_atomic(partial / MANIFEST, json_text(manifest, indent=2) + "\n")
    _check_room(partial)
    return manifest


def _collect_bounded(
    req: RunRequest, run_id: str, partial: Path, placement, prep: Prepared, booted: Booted, t_total: float,
    limits: ShareLimits, limit: CollectLimit,
) -> dict:  # fmt: skip
    """Stage 3's reading of the guest's files, under ``limit``: a reader it stops is a named problem."""
    outcome = booted.outcome
    problems: list[str] = []  # the guest's files that were not what its init writes
    try:
        with limit.reader():
            unpacked = unpack_results(booted.share, partial, limits.output_bytes, limits.tar_members)  # tars -> files
    except CollectOverrun as e:
        unpacked = Unpacked(problems=[f"the guest's tars were not unpacked: {e}"])
    _guarded(problems, "trace buffers", assemble_run, None, partial, limit=limit)  # trace-raw/ -> trace.dat (raw)
    total_s = time.monotonic() - t_total
    files = sorted(p.name for p in partial.iterdir() if p.is_file())
    access_result = latency_result = None
    if prep.access is not None and req.latency is not None:
        latency_result = latency_run.measure(
            partial, prep.access.latency_output, req.latency, booted.workload_start_ns, booted.workload_end_ns
        )
    if prep.access is not None and req.access_sample:
        workload_s = workload_seconds(outcome)
        access_result = access_run.measure(
            partial, prep.access, req.topology, booted.workload_start_ns, booted.workload_end_ns,
            round(workload_s, 2) if workload_s is not None else None, req.clock.virtual,
        )  # fmt: skip
    image_facts = GuestImage(tuple(prep.tools), tuple(prep.programs), prep.initrd.stat().st_size, prep.user)
    manifest = build_manifest(
        _collect(
            req, run_id, partial, placement, booted.backend_info, outcome, total_s, unpacked, booted.share, files,
            boot_protocol=prep.protocol, firmware_rom=prep.firmware, guest_image=image_facts, access=access_result,
            stalled_boots=tuple(booted.stalled), latency=latency_result, problems=problems, limit=limit,
        )
    )  # fmt: skip
    if manifest["status"] == "ok" and "lpj=" not in booted.boot.cmdline and not req.clock.virtual:
        dmesg = _read(partial / DMESG_BOOT)
        _guarded([], "boot log", tcg_boot.learn, None, req.kernel.image, req.accel, dmesg, prep.tsc_host, limit=limit)
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


def _collect(
    req,
    run_id,
    d: Path,
    placement,
    backend_info: dict,
    outcome,
    total_s: float,
    unpacked: Unpacked,
    share: Path,
    files: list[str],
    *,
    boot_protocol: str,
    firmware_rom: str,
    guest_image: GuestImage,
    access: AccessResult | None,
    stalled_boots: tuple[dict, ...] = (),
    latency: AccessResult | None = None,
    problems: list[str] | None = None,
    limit: CollectLimit = NO_LIMIT,
) -> ManifestInputs:
    """What the run record and the outcome say, classified, for the manifest (lab.run.manifest)."""
    data_problems: list[str] = problems if problems is not None else []  # the guest's files that were not right
    guarded = functools.partial(_guarded, data_problems, limit=limit)
    readback, domains, groups, problems = _guest_view(req, d, outcome, unpacked, guarded)
    console = _read(d / CONSOLE_LOG)
    release = (read_guest_text(d / UNAME, data_problems) or "").strip()[:256] or None  # (not UTF-8: a problem)
    # (before any timing is taken)
    marks = guarded("stage marks", check_marks, [], outcome, not req.clock.virtual, req.mark_slack_s())
    evidence, result = _evidence(req, d, outcome, unpacked, share, console, problems, data_problems, guarded)
    guest_build_id = guarded("kernel notes", build_id, None, d / KERNEL_NOTES)
    if guest_build_id is None and evidence.booted and req.kernel.expected_build_id()[0]:
        data_problems.append(f"{KERNEL_NOTES}: no GNU build-id: the kernel the guest runs cannot be verified")
    evidence = replace(evidence, kernel_problem=kernel_problem(req.kernel, guest_build_id, evidence.booted))
    ws = outcome.stage("workload-start")
    t0 = ws.guest_uptime if ws and not ws.contradicted else None
    metrics = _metrics(req, d, outcome, evidence.booted, t0, result, guarded)
    implausible = marks + guarded("plausibility checks", _implausible, [], req, outcome, result, metrics)
    # (a problem names a file as the record has it: the '.partial' directory it was read in is renamed)
    data_problems[:] = in_record(data_problems, d)
    unpacked.problems[:] = in_record(unpacked.problems, d)
    if metrics.get("trace_problems"):
        metrics["trace_problems"] = in_record(metrics["trace_problems"], d)
    # (every reader's problem counts, the metrics' too: docs/security.md, "a net under the readers")
    check = outcome.placement_check or {}
    evidence = replace(evidence, data_problems=tuple(data_problems), unpack_problems=tuple(unpacked.problems),
                       implausible=tuple(implausible),
                       placement_problems=tuple(check.get("problems") or ()))  # fmt: skip
    status, reason = classify(evidence)
    return ManifestInputs(
        run_id=run_id,
        label=req.label,
        topology=req.topology,
        kernel=req.kernel,
        workload_name=req.workload.name,
        workload_user=_user_record(req.workload, result),
        plan=req.plan,
        accel=req.accel,
        accel_reason=req.accel_reason,
        clock=req.clock.to_dict(),
        # (a remote libvirt host pins and binds by its own inventory: that plan is the run's, lab.vm.libvirt)
        placement=backend_info.get("placement") or placement.to_dict(),
        backend_info=backend_info,
        outcome=outcome,
        status=status,
        reason=reason,
        total_s=total_s,
        timeout_s=req.timeout(),
        workload_result=result,
        workload_rc=evidence.workload_rc,
        guest_release=release,
        build_id=guest_build_id,
        knobs_readback=_read(d / KNOBS).splitlines()[:256],
        guest=GuestView(
            readback,
            domains,
            problems,
            guarded("kernel complaints", read_complaints, [], d),
            guarded("sched groups", groups_record, {}, req.topology, groups),
        ),  # fmt: skip
        metrics=metrics,
        files=files,
        share=inventory(share),
        limits=asdict(req.limits()),
        unpacked=unpacked,
        console=console,
        boot_protocol=boot_protocol,
        firmware_rom=firmware_rom,
        firmware_choice=req.firmware,
        guest_image=guest_image,
        access=access,
        latency=latency,
        stalled_boots=stalled_boots,
        data_problems=(*data_problems, *implausible),
        guest_clocksource=clocksource_of(_read(d / DMESG_BOOT)),
    )


def kernel_problem(kernel, guest_build_id: str | None, booted: bool) -> str | None:
    """Why the guest is not running the kernel asked for (its build-id against the build's), or None."""
    expected, source = kernel.expected_build_id()
    if not booted or expected is None or guest_build_id is None:
        return None  # (no build-id on either side: the run is unverified; a guest's missing one is a data problem)
    if guest_build_id != expected:
        return (
            f"the guest runs build-id {guest_build_id[:16]}, but {kernel.name} is {expected[:16]} (its {source}): "
            "another kernel booted, e.g. a stale payload"
        )
    return None


def in_record(problems: list[str], d: Path) -> list[str]:
    """``problems`` with the run directory's path (``.<id>.partial`` while the run is collected, renamed when it
    is complete) taken out: a file is named by its place in the record."""
    prefixes = sorted({f"{d}/", f"{d.resolve()}/", f"{d.absolute()}/"}, key=len, reverse=True)
    out = []
    for p in problems:
        for prefix in prefixes:
            p = p.replace(prefix, "")
        out.append(p)
    return out


def _implausible(req: RunRequest, outcome, result: dict | None, metrics: dict) -> list[str]:
    """The guest's figures checked against what the host saw (lab.analysis.plausible): named problems."""
    windows = plausible.host_windows(outcome, not req.clock.virtual)
    user = req.workload.user
    seconds = set(SECONDS_METRICS) | {m.name for m in (user.metrics if user else ()) if m.unit == "s"}
    signed = set() if user is None else None if user.all_numeric else {m.name for m in user.metrics}
    return [
        *plausible.result_problems(result, windows, seconds, signed),
        *plausible.counter_problems(metrics),
        *plausible.cpu_problems(metrics.get("node_cpu") or {}, req.topology.total_cpus, windows),
    ]


def _user_record(workload: Workload, result: dict | None) -> dict | None:
    """A user's workload in the manifest: its file (path and content hash), what it carried, how its output is
    read, and its metrics' declarations, which compare and the report read back (lab.analysis.metrics)."""
    if workload.user is None:
        return None
    # (--workload-cmd: a number named like a built-in metric, e.g. elapsed_s, is compared as that one)
    decls = [d for d in workload.user.declarations(result) if f"workload.{d['name']}" not in METRIC_KEYS]
    return {"spec": workload.user.record(), "metrics": decls}


def _evidence(
    req,
    d: Path,
    outcome,
    unpacked: Unpacked,
    share: Path,
    console: str,
    problems: list[str],
    data_problems: list[str],
    guarded: Callable,
) -> tuple[Evidence, dict | None]:
    """What the run's status is decided on (lab.vm.status.classify), and the workload's own result."""
    evidence = Evidence(
        console_tail=console[-20000:],
        timed_out=outcome.timed_out,
        booted=outcome.stage("booted") is not None,
        guest_done=guest_done(share),
        workload_rc=_int_file(d / WORKLOAD_RC),
        trace_rc=_int_file(d / TRACE_RECORD_RC),
        topology_problems=tuple(problems),
        unpack_problems=tuple(unpacked.problems),
        limit=outcome.limit or unpacked.limit,
        vm_failure=outcome.vm_failure,
        guest_panicked=outcome.guest_panicked,
        hang_kind=(outcome.hang_state or {}).get("kind"),
    )
    out_text = read_guest_text(d / WORKLOAD_OUT, data_problems)  # (bytes that are not UTF-8: a named problem)
    result = guarded("workload output", parse_output, {"parse_error": "unreadable"}, req.workload, out_text or "") \
        if out_text is not None else None  # fmt: skip
    if result and result.get("parse_error") and evidence.workload_rc == 0:
        evidence = replace(evidence, result_problem=result["parse_error"])
    failed = outcome.stage("failed")  # (the init's own mark, with the run's token: lab.vm.console)
    evidence = replace(evidence, data_problems=tuple(data_problems), init_failure=failed.detail if failed else None)
    return evidence, result


def _guest_view(req, d: Path, outcome, unpacked: Unpacked, guarded: Callable) -> tuple:
    """The guest's own view read back (topology, sched domains, sched groups) and what does not match the
    topology asked for: (readback, domains, groups, problems)."""
    readback_problems: list[str] = []
    readback = guarded("topology readback", read_topology, None, d, readback_problems)
    domains = guarded("sched domains", read_sched_domains, {}, d, readback_problems)
    cpus = guarded("CPU readback", read_cpus, None, d, readback_problems)
    if readback is not None and cpus is not None:
        readback["cpus"] = cpus
    problems: list[str] = []
    if outcome.stage("booted"):
        rejected = [p for p in unpacked.problems if p.startswith(READBACK_TAR)]
        if readback is None and rejected:
            problems.append(f"the guest's topology readback was rejected: {rejected[0]}")
        problems += [f"the guest's topology readback is malformed: {p}" for p in readback_problems]
        problems += guarded("topology check", check_topology, [], req.topology, readback, domains)
        release = (read_guest_text(d / UNAME) or "").strip()[:64] or None
        levels = guarded("kernel config", _configured_levels, ALL_LEVELS, req.kernel.config)
        problems += guarded("CPU topology check", check_cpus, [], req.topology, cpus, domains, release, levels)
    groups = guarded("sched_verbose dump", read_sched_groups, {}, d)  # the groups, against 6.1's construction
    problems += guarded("sched groups check", check_groups, [], req.topology, groups) if outcome.stage("booted") else []
    return readback, domains, groups, problems


def _configured_levels(config: Path | None) -> frozenset[str]:
    """The SMT, CLS and MC levels the booted kernel's config builds (all of them when it has no config file)."""
    return configured_levels(config.read_text(errors="replace") if config and config.is_file() else None)


def _metrics(req, d: Path, outcome, booted: bool, t0: float | None, result: dict | None, guarded: Callable) -> dict:
    """The run's metrics: trace and vmstat (from the workload's start, ``t0`` in guest uptime), each node's CPU
    time, and the per-vCPU-second twins of the workload's throughputs (a user workload's declared rates too)."""
    metrics = guarded("metrics", run_metrics, {}, d, req.topology, req.plan.trace_events, t0) if booted else {}
    if booted and (cpu_time := guarded("/proc/stat snapshots", node_cpu_time, {}, d, req.topology)):
        metrics["node_cpu"] = cpu_time
    user = _user_record(req.workload, result)
    clock = "virtual" if req.clock.virtual else "host"  # (under the virtual clock: none, per_vcpu_second says why)
    if twins := per_vcpu_second(result, outcome.vcpu_time, user["metrics"] if user else None, clock):
        metrics["per_vcpu_s"] = twins  # work per vCPU CPU-second (lab.analysis.metrics.TWINS, a user's rates)
    return metrics


def _guarded(problems: list[str], what: str, fn: Callable, default, *args, limit: CollectLimit = NO_LIMIT):
    """``fn(*args)``, or ``default`` with the failure in ``problems``: no reader of the guest's files may stop
    a run record from being written (they are meant to be total; this is the net under them), nor run past
    the collection's ``limit`` (lab.run.collect_limit)."""
    try:
        with limit.reader():
            return fn(*args)
    except CollectOverrun as e:
        problems.append(f"{what}: not read ({e})")
        return default
    except Exception as e:  # noqa: BLE001 (a guest's file, whatever it holds, is a result)
        problems.append(f"reading the {what} failed: {type(e).__name__}: {term_safe(str(e))[:200]}")
        return default


def _secs(v: float | None) -> str:
    """'8.11s', or '-' (not '-s') for a stage the run never reached."""
    return "-" if v is None else f"{v}s"


def print_summary(manifest: dict, out=sys.stdout) -> None:
    """The closing lines of a run, for a person."""
    m = manifest.get("metrics", {})
    t = manifest["timings"]
    counts = m.get("events", {})
    vm = m.get("vmstat", {})
    complaints = (manifest.get("guest_topology") or {}).get("kernel_complaints") or []
    lines = [
        f"run {manifest['run_id']}: {manifest['status']} ({manifest['reason']})",
        f"  topology {manifest['topology']['name']}  kernel {manifest['kernel']['name']}"
        f" ({manifest['kernel'].get('guest_release') or '?'})  workload {manifest['workload']['name']}"
        f"  accel {manifest['accelerator']['name']}",
        f"  boot {_secs(t['boot_s'])}  workload {_secs(t['workload_s'])}"
        f"  total {t['total_s']}s  guest topology {'ok' if manifest['guest_topology_ok'] else 'NOT ok'}"
        + (f", but the kernel complained ({len(complaints)})" if complaints else ""),
        *(f"  KERNEL: {complaint_line(c)}" for c in complaints),
    ]
    if counts:
        share = m.get("lost_share")
        lost_pct = f" {percent(share * 100)}% of its records" if share is not None else " events"
        incomplete = f" (INCOMPLETE: the trace lost{lost_pct})" if is_incomplete(m) else ""
        if m.get("trace_unreadable"):
            incomplete = " (NOT MEASURED: the trace could not be read)"
        lines.append(f"  events{incomplete} " + "  ".join(f"{k}={'-' if v is None else v}" for k, v in counts.items()))
    # (a run that failed has its reason; that its trace is missing then is no news)
    ok = manifest["status"] == "ok"
    for problem in [*(m.get("trace_problems", []) if ok else []), *manifest.get("guest_data_problems", [])]:
        lines.append(f"  PROBLEM: {problem}")
    for note in m.get("interface_notes", []):
        lines.append(f"  NOTE: {note}")
    if ok and m.get("trace_unreadable"):
        lines.append("    the trace could not be read: no event counts; numalab compare leaves this run out")
    if m.get("lost_events"):
        lines.append(f"  LOST EVENTS: {describe_lost(m)}")
        if is_incomplete(m):
            lines.append("    event counts are too low; numalab compare leaves this run out (--include-incomplete)")
    if vm:
        hl = vm.get("hint_local_pct")
        lines.append(
            f"  numa_pages_migrated={vm.get('numa_pages_migrated', '-')}"
            f"  numa_hint_faults={vm.get('numa_hint_faults', '-')}"
            f"  hint-local={'-' if hl is None or not vm.get('numa_hint_faults') else percent(hl, 2) + '%'}"
        )
    clock = manifest["accelerator"].get("clock") or {}
    if clock.get("mode") == "virtual" and (path := m.get("trajectory")):  # (lab.analysis.trajectory)
        parts = "  ".join(f"{k} {v}" for k, v in path.items() if k != "path")
        lines.append(f"  trajectory {path['path']} (seed {clock.get('seed', '-')}: {parts})")
    vt = manifest.get("vcpu_time") or {}
    if vt.get("run_s") is not None:
        twins = "".join(f"  {k}={v:.4g}" for k, v in (m.get("per_vcpu_s") or {}).items())
        wait = f", {vt['wait_s']:.2f}s waiting" if vt.get("wait_s") is not None else ""
        lines.append(f"  vCPU time {vt['run_s']:.2f}s{wait} over {vt['window_s']:g}s ({vt['n_vcpus']} vCPUs){twins}")
    elif vt.get("problem"):
        lines.append(f"  vCPU time not measured: {vt['problem']}")
    for sb in manifest.get("stalled_boots", []):
        lines.append(f"  boot attempt {sb['attempt']} stalled (no init after {sb['deadline_s']:.0f}s;"
                     f" {describe_hang(sb.get('vm_at_timeout'))});"
                     " booted again")  # fmt: skip
    if manifest.get("vm_at_timeout"):
        lines.append(f"  at the timeout: {describe_hang(manifest['vm_at_timeout'])}")
    lines += access_run.summary_lines(manifest)
    lines += latency_run.summary_lines(manifest)
    # The reason, the guest's release, complaints...: the guest's words. None reaches a terminal raw.
    print("\n".join(term_safe(ln) for ln in lines), file=out)

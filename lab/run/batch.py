"""Run options (lab.run.options.RunOptions) -> run requests, executed: what ``numalab run``, the matrix's
children and the tests call."""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from lab.analysis.numa import default_events, lean_events
from lab.analysis.sched_cache import configured
from lab.analysis.scheduler_class import side_names
from lab.errors import LabError
from lab.guest.settings import GuestSettings
from lab.host.accel import accel_verdict
from lab.kernel.bootable import Kernel
from lab.kernel.resolve import resolve_kernel
from lab.paths import read_text_file
from lab.placement.pinning import Backing
from lab.run import instrument_set
from lab.run.execute import Interrupted, execute
from lab.run.instrument import Plan
from lab.run.options import RunOptions
from lab.run.request import RunRequest
from lab.run.scheduler import resolve as resolve_scheduler
from lab.run.summary import print_summary
from lab.topology.model.topology import Topology
from lab.vm.backend import Backend
from lab.vm.libvirt.libvirt_backend import LibvirtBackend
from lab.vm.libvirt.libvirt_hostspec import HostSpec
from lab.vm.qemu.emulator import qemu_version_tuple
from lab.vm.qemu.emulator import resolve as resolve_emulator
from lab.vm.qemu.qemu_argv import check_firmware_can_boot
from lab.vm.qemu.qemu_backend import QemuBackend
from lab.vm.tcg.guest_clock import GuestClock, check_parallel_time, pause_ns_for
from lab.vm.tcg.guest_clock import check as check_clock
from lab.workloads.workload_type import Workload


def trace_events_of(opts: RunOptions) -> tuple[str, ...]:
    """What a run traces: the events the default analyses need (lab.analysis.numa), with --lean only those of
    NUMA balancing's own analyses, then the --event ones, each once; nothing with --no-trace."""
    return opts.tracing.trace_events(*_event_sets())


def _event_sets() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The analyses' default events and --lean's (lab.analysis.numa), by their full names."""
    return tuple(e.full for e in default_events()), tuple(e.full for e in lean_events())


def settings_of(opts: RunOptions, workload: Workload, topo: Topology) -> GuestSettings:
    """The guest settings of ``opts``, the same for every kernel and repeat (its /plan/plan.sh and kernel command
    line; the golden files in tests/golden/guest/ pin both down for a few runs)."""
    # tiering: NUMA_BALANCING_MEMORY_TIERING (2), promotion from lower memory tiers, with demotion on
    balancing = {"on": "1", "off": "0", "default": None, "tiering": "2"}[opts.numa_balancing]
    return GuestSettings(
        workload_cmd=workload.command(topo, opts.duration),
        duration_s=opts.duration,
        numa_balancing=balancing,
        knobs=opts.knob_values(),
        **opts.tracing.settings_fields(*_event_sets()),
        test_fault="mutate" if opts.test_fault.startswith("mutate=") else opts.test_fault,
        test_script=_test_script(opts.test_fault),
        kernel_args=" ".join(opts.append),
        demotion="true" if opts.numa_balancing == "tiering" else "",
    )


def _test_script(test_fault: str) -> str:
    """--test-fault mutate=SCRIPT (the tests): the script's text, for the guest settings."""
    if not test_fault.startswith("mutate="):
        return ""
    path = Path(test_fault.partition("=")[2])
    return read_text_file(path, "--test-fault mutate=")


def check_llc_knobs(knobs: dict[str, str], kernels: list) -> None:
    """A cache-aware scheduling knob (``llc_balancing/...``) asked of a kernel whose config shows it has none: one
    line before any boot (a kernel whose config numalab does not know, such as a bzImage path, is left to the
    guest, whose init then fails at that knob's stage)."""
    asked = sorted(k for k in knobs if k.startswith("llc_balancing/"))
    if not asked:
        return
    for k in kernels:
        if configured(_config_text(k.config)) is False:
            raise LabError(f"--knob {asked[0]}: kernel {k.name} has no CONFIG_SCHED_CACHE (cache-aware scheduling, "
                           "7.x: numalab kernel build --source debian:7.3)")  # fmt: skip


def _config_text(config: Path | None) -> str | None:
    return config.read_text(errors="replace") if config is not None and config.is_file() else None


def requests_from_options(opts: RunOptions, progress: Callable[[str], None]) -> list[RunRequest]:
    """The runs ``opts`` asks for (repeats and kernels interleaved A B A B), every value checked first."""
    opts.check()  # (done on construction too; again here for options changed with object.__setattr__)
    output_limit = opts.output_limit_bytes()
    workload = opts.workload_of()
    topo = opts.topology.load()
    kernels = [resolve_kernel(k) for k in opts.kernels]
    names = [k.name for k in kernels]
    if len(set(names)) < len(names):
        raise LabError(f"--kernel: the kernels must have distinct names, got {', '.join(names)}")
    check_llc_knobs(opts.knob_values(), kernels)
    # The A/B's sides: the kernels, each with the one scheduler; or the schedulers, each on the one kernel.
    sides = [(k, resolve_scheduler(s, k, progress)) for k in kernels for s in opts.schedulers]
    if opts.numa_balancing == "tiering" and not (topo.tiers and topo.tiers.slow_nodes):
        progress(f"warning: --numa-balancing tiering on {topo.name}, which has no slow memory tier: nothing to promote")
    settings = settings_of(opts, workload, topo)
    instruments = instrument_set.instruments_of(opts, topo)
    plan = Plan(opts.vm.asked_accel, opts.vm.backend, opts.vm.connect or "", opts.guest_time.clock)
    instrument_set.check(instruments, plan)  # before a libvirt host is asked
    check_clock(opts.guest_time.clock, opts.vm.backend, opts.vm.accel, None)  # before a libvirt host is asked
    backend = backend_of(opts)
    rom = backend.firmware_rom(opts.vm.firmware)  # a firmware this backend cannot boot: say so first
    backend.check_machine(topo)  # a machine this backend's QEMU (or libvirt) cannot boot as specified
    check_firmware_can_boot(topo, rom, qemu_version_tuple(backend.emulator_version()))
    clock, accel, reason, kvm_probe_s = _clock_and_accel(opts, kernels[0], backend, progress)
    instrument_set.check(instruments, replace(plan, accel=accel, emulator=backend.emulator))
    if instrument_set.from_workload(instruments):
        settings = replace(settings, model_start=True)
    backing = Backing(opts.backing, opts.prealloc)
    batch = batch_dir(opts, len(sides))
    reqs = []
    # A B A B ...: drift on the host affects every kernel alike.
    for i in range(opts.repeat):
        for kernel, sched in sides:
            side = sched.label if len(opts.schedulers) > 1 else kernel.name
            out = _run_dir(batch, len(sides), opts.repeat, side, i)
            shown = kernel.name if not sched.sched_ext else f"{kernel.name} {sched.label}"
            label = f"{shown} repeat {i + 1}/{opts.repeat}"
            seeded = replace(clock, seed=opts.guest_time.seed_of(i)) if clock.virtual else clock
            side_settings = replace(settings, scheduler_cmd=sched.guest_command(), scheduler_ops=sched.ops,
                                    scheduler_wait_s=sched.wait_s)  # fmt: skip
            reqs.append(
                RunRequest(
                    topo,
                    kernel,
                    workload,
                    side_settings,
                    accel,
                    reason,
                    backing,
                    out,
                    opts.runs_dir,
                    opts.timeout,
                    label,
                    backend=backend,
                    pinning=opts.pinning,
                    firmware=opts.vm.firmware,
                    guest_output_limit=output_limit,
                    instruments=instruments,
                    access_map=opts.access.access_address_map,
                    boot_deadline_s=opts.boot_deadline,
                    clock=seeded,
                    kvm_probe_s=kvm_probe_s,
                    scheduler=sched,
                )
            )
    return reqs


def _clock_and_accel(
    opts: RunOptions, kernel: Kernel, backend: Backend, progress: Callable[[str], None]
) -> tuple[GuestClock, str, str, float]:
    """The guest clock, the accelerator, why it was chosen and the KVM probe's seconds: TCG under --clock virtual
    (QEMU's instruction counter cannot run under KVM), the probe's verdict for --accel auto (``kernel`` boots it,
    on the host the backend runs VMs on), else --accel."""
    asked = opts.guest_time
    clock = asked.guest_clock()
    if clock.virtual:
        check_clock(asked.clock, backend.name, opts.vm.accel, qemu_version_tuple(backend.emulator_version()))
        check_parallel_time(asked.quantum, backend.emulator, asked.insns_per_ns)
        clock = replace(clock, pause_ns=pause_ns_for(backend.emulator))
        return clock, "tcg", "--clock virtual (QEMU's instruction counter is the guest's clock: TCG only)", 0.0
    if opts.vm.asked_accel is not None:
        return clock, opts.vm.asked_accel, "chosen with --accel", 0.0
    verdict = accel_verdict(kernel.image, backend)
    accel = verdict["accel"]
    kvm_probe_s = float(verdict["kvm"].get("seconds") or 0.0) if accel == "kvm" else 0.0
    reason = verdict.get("warning") or f"KVM probe{verdict.get('where', '')}: {verdict['kvm']['detail']}"
    if accel == "tcg" and not verdict.get("cached"):
        progress(f"warning: {reason}")  # once: when the probe ran (numalab doctor shows the cached verdict)
    return clock, accel, reason, kvm_probe_s


def _run_dir(batch: Path | None, sides: int, repeat: int, side: str, i: int) -> Path | None:
    """Repeat ``i``'s record directory in the batch's: the batch's own for one run, r<N> for one side's repeats,
    <side>-r<N> for an A/B's."""
    if batch is None:
        return None
    if sides == 1:
        return batch if repeat == 1 else batch / f"r{i + 1}"
    return batch / f"{side}-r{i + 1}"


def backend_of(opts: RunOptions):
    """--backend qemu|libvirt [--connect URI]; a libvirt host is checked now (one-line error), before any build."""
    asked = opts.vm  # (lab.vm.backend_options.BackendOptions, checked)
    if asked.backend != "libvirt":
        return QemuBackend(resolve_emulator(asked.qemu))
    if asked.qemu:
        raise LabError("--qemu: only with --backend qemu (a libvirt host runs the emulator its domains name)")

    uri = asked.connect or "qemu:///system"
    if "://" not in uri:
        raise LabError(f"--connect {uri}: not a libvirt URI (e.g. qemu:///system, qemu+ssh://user@host/system)")
    if asked.pool_dir and not asked.pool_dir.startswith("/"):
        raise LabError(f"--pool-dir {asked.pool_dir}: must be an absolute path on the libvirt host")
    backend = LibvirtBackend(uri, HostSpec(uri, 1, asked.pool_dir or "", not asked.no_upload))
    backend.check()
    return backend


def batch_dir(opts: RunOptions, n_sides: int) -> Path | None:
    """Where a batch of runs goes: --out, or runs/ab-<time> for an A/B batch, or None (runs/<id> each)."""
    if opts.out is not None:
        if opts.out.exists() and (opts.repeat > 1 or n_sides > 1):
            raise LabError(f"--out {opts.out}: already exists; give a new directory")
        return opts.out
    if n_sides > 1:
        return opts.runs_dir / time.strftime("ab-%Y%m%d-%H%M%S", time.gmtime())
    return None


def print_side_by_side(manifests: list[dict], out) -> None:
    """Each side's tracepoint counts (mean over repeats), side by side."""
    by_side: dict[str, list[dict]] = {}
    for side, m in zip(side_names(manifests), manifests):
        by_side.setdefault(side, []).append(m)
    events = sorted({e for m in manifests for e in m.get("metrics", {}).get("events", {})})
    print("\nper-kernel mean over repeats:", file=out)  # (the words printed since before a side could be a scheduler)
    print(f"  {'':<22}" + "".join(f"{k[:18]:>20}" for k in by_side), file=out)
    for ev in [*events, "numa_pages_migrated"]:
        cells = []
        for ms in by_side.values():
            vals = [
                (m["metrics"].get("vmstat", {}) if ev == "numa_pages_migrated" else m["metrics"].get("events", {})).get(
                    ev
                )
                for m in ms
                if m.get("metrics")
            ]
            vals = [v for v in vals if v is not None]
            cells.append(f"{statistics.fmean(vals):.1f} (n={len(vals)})" if vals else "-")
        print(f"  {ev:<22}" + "".join(f"{c:>20}" for c in cells), file=out)


@dataclass
class Batch:
    """What a batch of runs left (run_options, lab.run.auto_pairs.run_auto): each run's record and manifest,
    and its exit status. The report is the caller's to ask for (the CLI: lab.cli.cmd_run.finish)."""

    paths: list[Path] = field(default_factory=list)  # the run records, in the order they ran
    manifests: list[dict] = field(default_factory=list)
    interrupted: int = 0  # 130 (SIGINT) or 143 (SIGTERM) when a signal stopped the batch
    verdict: dict | None = None  # --repeat auto: what verdict.json holds

    @property
    def status(self) -> int:
        """The exit status: 0 when every run is ok, 1 otherwise; 130/143 when interrupted."""
        if self.interrupted:
            return self.interrupted
        return 0 if all(m["status"] == "ok" for m in self.manifests) else 1

    @property
    def sides(self) -> set[str]:
        """The sides the batch ran: its kernels, each with its scheduler where one ran a sched_ext scheduler
        (lab.analysis.scheduler_class.side_names); more than one is an A/B."""
        return set(side_names(self.manifests))

    def report_path(self) -> Path:
        """Where its report goes: report.html in the run's record, or in the directory the runs share."""
        return (self.paths[0] if len(self.paths) == 1 else batch_dir_of(self.paths)) / "report.html"


def run_options(opts: RunOptions, progress: Callable[[str], None], json_out: bool = False) -> Batch:
    """Run everything ``opts`` asks for and print each run's summary (on stderr with ``json_out``, where
    stdout is the caller's for JSON), then, for an A/B batch, the sides' tracepoint counts side by side.
    A signal stops the batch (``Batch.interrupted``) with QEMU stopped."""
    reqs = requests_from_options(opts, progress)
    batch = Batch()
    human = sys.stderr if json_out else sys.stdout
    try:
        for i, req in enumerate(reqs):
            tag = f"[{i + 1}/{len(reqs)}] " if len(reqs) > 1 else ""
            path, manifest = execute(req, lambda msg, tag=tag: progress(tag + msg))
            batch.manifests.append(manifest)
            batch.paths.append(path)
            print_summary(manifest, out=human)
            print(f"  record: {path}", file=human)
    except Interrupted as sig:
        progress(f"interrupted by {sig}: QEMU stopped; the unfinished run was left as a hidden .partial directory")
        batch.interrupted = 143 if str(sig) == "SIGTERM" else 130
        return batch
    if len(batch.sides) > 1:
        print_side_by_side(batch.manifests, human)
    return batch


def batch_dir_of(paths: list[Path]) -> Path:
    """The directory the runs share (their common parent)."""
    return Path(os.path.commonpath([p.resolve().parent for p in paths]))

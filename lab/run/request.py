"""What one run asks for (:class:`RunRequest`, built by lab.run.batch from the options) and what every stage of
the run reads (:class:`Trip`): the first shapes of lab.run.execute's pipeline (docs/architecture.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from lab.guest.settings import GuestSettings
from lab.kernel.resolve import Kernel
from lab.placement.pinning import Backing, Placement
from lab.run.collect_limit import COLLECT_LIMIT_S
from lab.run.instrument import Instrument
from lab.run.scheduler import FAIR, Scheduler
from lab.topology.model.topology import Topology
from lab.vm.backend import Backend
from lab.vm.console import SLACK_S
from lab.vm.qemu.qemu_backend import QemuBackend
from lab.vm.share import DEFAULT_OUTPUT_LIMIT, ShareLimits
from lab.vm.tcg.guest_clock import GuestClock
from lab.workloads.workload_type import Workload

BOOT_ALLOWANCE_S = 60.0  # TCG boot of a large guest on a small host
COLLECT_ALLOWANCE_S = 60.0  # trace-cmd merging + copying results
VIRTUAL_CLOCK_SCALE = 12.0  # host seconds a guest second may take under --clock virtual


@dataclass(frozen=True)
class RunRequest:
    topology: Topology
    kernel: Kernel
    workload: Workload
    settings: GuestSettings  # what the guest runs by (its /plan/plan.sh, its kernel command line)
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
    # the instruments the TCG plugin runs (lab.run.instrument: the access matrix, the memory charge), in the
    # manifest's order; none: no plugin
    instruments: tuple[Instrument, ...] = ()
    access_map: str = ""  # the plugin's address map (--access-address-map); "" chooses it from the QEMU version
    boot_deadline_s: float | None = None  # TCG: None for the default (boot_deadline), 0 for never
    clock: GuestClock = GuestClock()  # the guest's clock (lab.vm.tcg.guest_clock): the host's, or instructions
    # Seconds the KVM probe's 1-vCPU guest took to boot and power off (lab.host.accel), 0 when not probed: a
    # KVM that is slow to boot (nested KVM, at TCG's speed) gets a boot allowance and a stage-mark slack to match.
    kvm_probe_s: float = 0.0
    scheduler: Scheduler = Scheduler(FAIR, FAIR)  # --scheduler, resolved against the kernel (lab.run.scheduler)

    def limits(self) -> ShareLimits:
        """What the guest may send: ``guest_output_limit`` if given; else 1 GiB, or more if full trace
        buffers need it (every vCPU's, twice: the raw pages and their tar, plus 256 MiB for the rest)."""
        # The tars' files: the init's few dozen, and numalab-tracegrab's one a vCPU plus the event formats
        # (a few hundred); 1024 + 4 a vCPU leaves room for both, and a tar of 5,000 files from 2 vCPUs is refused.
        members = 1024 + 4 * self.topology.total_cpus
        if self.guest_output_limit is not None:
            return ShareLimits(output_bytes=self.guest_output_limit, tar_members=members)
        trace = 2 * self.topology.total_cpus * self.settings.trace_buffer_kb * 1024 if self.settings.trace_events else 0
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
        return boot_allowance_s(self.topology.total_cpus, self.accel, self.clock, self.kvm_probe_s)

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
        scale = math.prod(i.host_time_scale for i in self.instruments)  # (coherence's: lab.run.remote_latency)
        # (a sched_ext scheduler's load is guest time before the workload: the init waits up to its wait_s)
        waited = self.scheduler.wait_s if self.scheduler.sched_ext else 0.0
        return default_timeout_s(self.topology.total_cpus, self.settings.duration_s + waited, self.accel, self.clock,
                                 self.kvm_probe_s, scale)  # fmt: skip


def boot_allowance_s(total_cpus: int, accel: str, clock: GuestClock, kvm_probe_s: float = 0.0) -> float:
    """60 s + 2 s per vCPU; twice that under the virtual clock, whose one host thread runs every vCPU
    (a 4-vCPU boot took 26-36 s against 14 s multi-threaded, on QEMU 10 with the host loaded)."""
    allowance = BOOT_ALLOWANCE_S + 2 * total_cpus
    if accel == "kvm":
        # (under nested KVM the probe took 41 s and an idle ring-4 boot 58-162 s, by the host's load)
        allowance += 4 * kvm_probe_s * max(1, total_cpus // 2)
    return 2 * allowance if clock.virtual else allowance


def default_timeout_s(total_cpus: int, duration_s: float, accel: str, clock: GuestClock,
                      kvm_probe_s: float = 0.0, instrument_scale: float = 1.0) -> float:  # fmt: skip
    """A run's host-time limit when --timeout is not given: its boot allowance, its workload's guest seconds at
    the host seconds each may take (under the virtual clock times ``instrument_scale``, what the instruments
    multiply it by: lab.run.instrument), and the collection's allowance. A hang detector, so an upper bound."""
    scale = 1.0 if accel == "kvm" else _virtual_scale(total_cpus, clock, instrument_scale) if clock.virtual else 1.5
    return boot_allowance_s(total_cpus, accel, clock, kvm_probe_s) + duration_s * scale + COLLECT_ALLOWANCE_S


def _virtual_scale(total_cpus: int, clock: GuestClock, instrument_scale: float = 1.0) -> float:
    """Host seconds a guest second may take under the virtual clock. A guest second is 1 G instructions (times
    --insns-per-ns) run by one host thread: several host seconds. Under parallel guest time (--quantum) each vCPU
    has its own, so a busy machine's guest second is that many instructions a vCPU; and coherence's directory,
    looked up at every access, costs host time besides (``instrument_scale``: lab.run.remote_latency.COHERENCE_SCALE).
    Seed 000's 4-node machine, one vCPU a node, --quantum 2000: 5 guest s of numa01 in 57-91 host s with coherence
    off, 250-400 with it on, two VMs on 2 cores (2026-11-27/28); the one vCPU's worth the limit allowed (256 s) and
    then the coherence-less four (436 s) were both passed."""
    per = VIRTUAL_CLOCK_SCALE * clock.insns_per_ns * instrument_scale
    return per * total_cpus if clock.quantum_ns else per


@dataclass(frozen=True)
class Trip:
    """What every stage of one run reads (prepare, boot, collect): the request, the run's id, the record's
    ``.<id>.partial`` directory, the scratch directory, the host placement, the progress line and when the run
    started. One value instead of the six parameters each stage took."""

    req: RunRequest
    run_id: str
    record: Path  # the '.partial' directory the record is written in (renamed when it is complete)
    scratch: Path  # lab.paths.run_scratch: the initrd, the share, QMP's socket
    placement: Placement
    say: Callable[[str], None]
    started: float  # time.monotonic() when the run began (the manifest's total_s)

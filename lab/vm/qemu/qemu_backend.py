"""Run one VM with QEMU directly: start paused, pin vCPUs over QMP, watch, enforce a timeout.

QEMU is started with PR_SET_PDEATHSIG so it dies with us even on SIGKILL, and
killed in a ``finally`` on every other path: no orphans.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import resource
import select
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.placement.pinning import Placement
from lab.record_files import QEMU_ARGV, QEMU_LOG
from lab.topology.model.topology import Topology
from lab.vm.backend import VmRequest
from lab.vm.console import Stage, VmOutcome, WatchRules, watch
from lab.vm.hang import vm_state
from lab.vm.machine_needs import check_qemu_can_express
from lab.vm.placement_watch import PlacementWatch
from lab.vm.qemu.emulator import Emulator, qemu_version_tuple
from lab.vm.qemu.emulator import resolve as resolve_emulator
from lab.vm.qemu.firmware import resolve_firmware
from lab.vm.qemu.qemu_argv import qemu_argv
from lab.vm.qmp import QemuGone, Qmp
from lab.vm.share import ShareGuard
from lab.vm.vcpu_time import StageSampler, schedstat_sampler

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _child_setup(max_file_bytes: int | None) -> Callable[[], None]:
    """QEMU dies with us (PR_SET_PDEATHSIG), and with ``max_file_bytes`` no file it writes (a guest's
    file on the share, the console log) can grow past that: the write fails with EFBIG (SIGXFSZ is
    ignored), which the guest sees as an I/O error. The polling ShareGuard bounds the share as a whole;
    this bounds a single file however fast the guest writes it."""

    def setup() -> None:
        _die_with_parent()
        if max_file_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_bytes, max_file_bytes))

    return setup


def _exit_waiter(pidfd: int | None) -> Callable[[float], None]:
    """A sleep that ends early when the process behind ``pidfd`` exits (a plain sleep without one)."""
    if pidfd is None:
        return time.sleep
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return lambda seconds: poller.poll(seconds * 1000)


def run_vm(req: VmRequest, argv: list[str], env: dict[str, str] | None = None) -> VmOutcome:
    """Start QEMU with ``argv`` (and ``env``) for ``req``, pin its vCPUs as ``req.placement`` says, and wait for
    it to exit, ``req.timeout_s`` to pass or the share's guard (``req.limits``) to object.

    QEMU's own failures are a result (``outcome.vm_failure``), not an exception: one that exits
    before its monitor opens (a bad option, too many vCPUs) with what it said in the run directory's QEMU log;
    one killed by a signal with the signal's name.

    The placement's memory (host node -> bytes of guest memory bound there: :func:`planned_memory`) is watched
    from outside QEMU over the workload window (lab.vm.placement_watch) and the result is
    ``outcome.placement_check``."""
    boot, limits = req.boot, req.limits
    qemu_log = req.run_dir / QEMU_LOG
    qmp_socket = Path(boot.qmp_socket) if boot.qmp_socket else None
    pins = dict(enumerate(req.placement.vcpu_pins))
    guard = ShareGuard(Path(boot.results_dir) if boot.results_dir else None, Path(boot.console_log), limits)
    # (memfd and hugepage backings are files QEMU sizes itself: no file-size limit there)
    ram = req.placement.backing.kind == "ram"
    max_file_bytes = max(limits.output_bytes, limits.console_bytes) + (1 << 20) if ram else None
    proc = _start_qemu(argv, qemu_log, max_file_bytes, env)
    start = time.monotonic()
    outcome = VmOutcome(None, False, 0.0)
    sampler: StageSampler | None = None  # the vCPU threads' times at the workload's start and end
    placed: PlacementWatch | None = None
    try:
        pidfd: int | None = os.pidfd_open(proc.pid)
    except OSError:  # a kernel before 5.3
        pidfd = None
    try:
        if qmp_socket is not None:
            try:
                qmp = Qmp(qmp_socket, timeout=15, alive=lambda: proc.poll() is None)
            except (QemuGone, LabError, OSError) as err:  # OSError: QEMU died as we connected
                try:
                    proc.wait(2)
                except subprocess.TimeoutExpired:
                    pass
                outcome.exit_code = proc.poll()
                outcome.vm_failure = _qemu_failure(outcome.exit_code, qemu_log) or f"QEMU did not start: {err}"
                return outcome
            planned = planned_memory(req.topo, req.placement) or None  # (None: no memory placed, nothing to watch)
            sampler, listener, placed = _pin_and_start(qmp, proc.pid, pins, outcome, req.on_stage, planned)
        start = time.monotonic()
        try:
            rules = WatchRules(req.timeout_s, guard, req.boot_deadline_s, req.cancel)
            watch(
                Path(boot.console_log),
                outcome,
                rules,
                proc.poll,
                sampler or req.on_stage,
                _sampling_tick(sampler, req.on_tick, placed),
                wait=_exit_waiter(pidfd),
                token=boot.stage_token,
            )
        finally:
            outcome.vcpu_time = sampler.result() if sampler else None
            outcome.placement_check = placed.result() if placed else None
        if qmp_socket is not None:
            if proc.poll() is not None:
                listener.join(2)  # (the events QEMU sent before it exited)
            qmp.close()  # QEMU's monitor takes one client at a time: vm_state's
        if outcome.timed_out and qmp_socket is not None and proc.poll() is None:
            outcome.hang_state = vm_state(qmp_socket, lambda: proc.poll() is None, pid=proc.pid)
        if outcome.exit_code not in (None, 0):
            outcome.vm_failure = _qemu_failure(outcome.exit_code, qemu_log)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        outcome.wall_s = time.monotonic() - start
        if pidfd is not None:
            os.close(pidfd)
    return outcome


def _sampling_tick(
    sampler: StageSampler | None, on_tick: Callable[[float], None] | None, placed: PlacementWatch | None = None
) -> Callable[[float], None] | None:
    """``on_tick``, and a fresh sample of the vCPU threads inside the workload window at each look: a guest that
    powers off soon after its end mark is gone (its threads with it) before the watcher reads the mark, and the
    end then falls back to the last sample (StageSampler.refresh; measured: 1 run in 4 of stress-ng-vm)."""
    if sampler is None:
        return on_tick

    def tick(now: float) -> None:
        sampler.refresh()
        if placed is not None:
            placed.tick()
        if on_tick is not None:
            on_tick(now)

    return tick


def _start_qemu(argv: list[str], qemu_log: Path, max_file_bytes: int | None, env: dict[str, str] | None):
    """QEMU started, stopped (-S) until :func:`_pin_and_start`; its output goes to ``qemu_log``."""
    with open(qemu_log, "wb") as log:
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_child_setup(max_file_bytes),
                env={**os.environ, **env} if env else None,
            )
        except FileNotFoundError:
            raise LabError(f"{argv[0]}: not found; install qemu-system-x86 (make setup)") from None


def _pin_and_start(
    qmp: Qmp,
    pid: int,
    pins: dict[int, tuple[int, ...]],
    outcome: VmOutcome,
    on_stage: Callable[[Stage], None] | None,
    planned_memory: dict[int, int] | None = None,
) -> tuple[StageSampler, threading.Thread, PlacementWatch | None]:
    """Each vCPU thread pinned (a failure is recorded, not raised), the VM continued, and QEMU's events
    listened to from then on (GUEST_PANICKED: the guest kernel's pvpanic notifier, qemu_argv's -device
    pvpanic). On any error the monitor is closed before it propagates."""
    try:
        tids = qmp.vcpu_threads()
        placed = PlacementWatch(pid, tids, pins, planned_memory, on_stage) if planned_memory is not None else None
        sampler = StageSampler("schedstat", schedstat_sampler(pid, tids), placed or on_stage)
        for vcpu, tid in tids.items():
            # (a thread that runs several vCPUs, single-threaded TCG under --clock virtual, gets all their CPUs)
            cpus = tuple(sorted({c for v, t in tids.items() if t == tid for c in pins.get(v, ())}))
            if not cpus:
                continue
            try:
                os.sched_setaffinity(tid, cpus)
                outcome.pinned[vcpu] = format_cpulist(os.sched_getaffinity(tid))
            except OSError as err:
                outcome.pin_error = f"vCPU {vcpu} -> CPUs {format_cpulist(cpus)}: {err.strerror}"
        qmp.command("cont")
        return sampler, qmp.listen(functools.partial(_on_event, outcome)), placed
    except BaseException:
        qmp.close()
        raise


def _on_event(outcome: VmOutcome, event: dict) -> None:
    if event.get("event") == "GUEST_PANICKED":
        outcome.guest_panicked = True


def _qemu_failure(code: int | None, qemu_log: Path) -> str | None:
    """One line for a QEMU that ended badly: the signal that killed it, or its exit code and last words."""
    if code is None or code == 0:
        return None
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"QEMU was killed by {name}"
    try:
        said = [ln.strip() for ln in qemu_log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        said = []
    return f"QEMU exited with {code}" + (f": {said[-1][:300]}" if said else " (qemu.log is empty)")


def planned_memory(topo: Topology, placement: Placement) -> dict[int, int]:
    """Host node -> bytes of guest memory the plan binds there."""
    out: dict[int, int] = {}
    for node, host in zip(topo.nodes, placement.memory_host_nodes):
        out[host] = out.get(host, 0) + (node.memory_mib << 20)
    return out


class QemuBackend:
    """Direct QEMU on this host: no daemon needed. ``emulator``: which QEMU (default: $NUMALAB_QEMU, else the
    PATH's qemu-system-x86_64; lab.vm.qemu.emulator)."""

    name = "qemu"
    host_id = ""  # QEMU runs on this machine

    def __init__(self, emulator: Emulator | None = None) -> None:
        self.emulator = emulator or resolve_emulator()

    def probe_host(self) -> dict:
        """This machine, its kernel and the QEMU binary: what its accelerator verdict holds for
        (lab.vm.backend.Backend). Another QEMU (or an upgraded one) is probed anew."""
        qemu = hashlib.sha256(self.emulator.identity().encode()).hexdigest()[:10]
        return {"key": f"{platform.node()}-{platform.release()}-qemu{qemu}", "host": platform.node(),
                "host_kernel": platform.release(), "qemu": self.emulator.binary,
                "qemu_version": self.emulator.short_version, "where": ""}  # fmt: skip

    def emulator_version(self) -> str:
        """The QEMU's ``--version`` line (the access-matrix plugin's API and address map follow it)."""
        return self.emulator.version

    def check_machine(self, topo: Topology) -> None:
        """What the chosen QEMU cannot express (clusters before 9.2: lab.vm.machine_needs.required_qemu)."""
        check_qemu_can_express(
            topo, qemu_version_tuple(self.emulator.version), f"the chosen QEMU ({self.emulator.binary})"
        )

    def firmware_rom(self, choice: str) -> str:
        """--firmware auto|qboot|seabios -> the -bios ROM from this QEMU's own data directories ("" default)."""
        return resolve_firmware(choice, self.emulator.firmware_dirs)

    def kvm_missing(self) -> str:
        """Why a KVM boot cannot even be tried here ("" when /dev/kvm is there for us to open)."""
        if not os.path.exists("/dev/kvm"):
            return "/dev/kvm does not exist"
        if not os.access("/dev/kvm", os.R_OK | os.W_OK):
            return "/dev/kvm is not accessible (add yourself to group kvm)"
        return ""

    def run(self, req: VmRequest) -> tuple[VmOutcome, dict]:
        """Run QEMU for ``req`` (lab.vm.backend.Backend.run)."""
        argv = qemu_argv(req.topo, req.placement, req.boot, self.emulator.argv_prefix())
        (req.run_dir / QEMU_ARGV).write_text(shlex.join(argv) + "\n")
        outcome = run_vm(req, argv, self.emulator.env())
        info = {"name": self.name, "version": self.emulator.version, "qemu": self.emulator.to_dict()}
        return outcome, info | {"argv": argv, "exit_code": outcome.exit_code}

"""The guest's clock: the host's (default), or one that follows the work the vCPUs do (``--clock virtual``).

Under TCG a guest does 5-20x less work per second than hardware while its clock
runs at host speed: NUMA balancing's scan periods, the tick and the load
balancer's intervals, all wall-clock, come far too often per unit of work, and
how often depends on how loaded the host is.

``--clock virtual`` runs QEMU with ``-icount shift=0,sleep=off``: the guest's
virtual clock, and with it the TSC, the LAPIC timer, the HPET and the PM timer,
advances by 2^shift ns for every instruction the vCPUs execute, and jumps to the
next timer when every vCPU is idle (``sleep=off``). Guest time is then a count
of instructions, the same whatever the host is doing. What this costs:

* One host thread runs every vCPU in turn (icount rules out multi-threaded
  TCG), so a run takes longer in host time; the guest's time is unaffected.
* The modelled speed is shared: 1 G instructions per guest second (shift 0)
  across all vCPUs that are running, so with N busy vCPUs each does 1/N G per
  guest second. A busy vCPU's speed depends on how many others are busy, which
  real machines do not do. ``--quantum NS`` (numalab's patched QEMU, 0006)
  gives each vCPU its own time instead: each does 1 G a guest second, the
  machine's clock is the slowest running vCPU's, and none runs more than NS
  ahead of it (docs/qemu.md, "Parallel guest time").
* QEMU 7.2's icount hangs SMP boots (seen here); QEMU 10.0 boots them
  (``--qemu backports``, make setup-qemu10).
* An x86 PAUSE (every spin loop's ``cpu_relax()``: ``udelay()``, a lock's
  wait, a CPU waiting for another at boot) takes one instruction's time under
  stock icount and leaves QEMU's CPU loop, so a guest microsecond of spinning
  cost the host hundreds of trips through it: most of a virtual-clock boot's
  host time. With numalab's patched QEMU (0009) a PAUSE takes ``PAUSE_NS`` of
  guest time, about what it takes on a current server core (140 cycles on Intel
  since Skylake, at 3.5 GHz), then leaves the loop as before.

The other mechanism the plugin API offers, ``qemu_plugin_update_ns`` (QEMU 9.1+),
only runs timers up to a time: under TCG without icount QEMU's virtual clock is
the host's (the TCG accelerator has no ``set_virtual_clock``), so a plugin can
hold vCPUs back (contrib/plugins/ips.c sleeps them) but cannot make guest time
follow the instructions. icount can.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

from lab.errors import LabError

CLOCKS = ("host", "virtual")
ICOUNT_SHIFT = 0  # 2^0 ns a guest instruction: 1 G instructions per guest second, shared by the vCPUs
MIN_QEMU = (10, 0)  # 7.2's icount hangs SMP boots
# Under the virtual clock the guest's RTC starts here (plus the seed, in seconds) and runs on the guest's clock.
RTC_EPOCH = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
MAX_SEED = 10**9  # about 31 years of seconds after the epoch: a date every kernel takes
INSNS_PER_NS_MAX = 64  # --insns-per-ns: QEMU's (images/qemu/0007) own bound
QUANTUM_RANGE_NS = (100, 100_000_000)  # --quantum: below, a switch every few dozen instructions; above, 0.1 s
PAUSE_NS = 40  # guest ns an x86 PAUSE takes under the virtual clock, with a QEMU that can (images/qemu/0009)


@dataclass(frozen=True)
class GuestClock:
    """``seed`` (virtual clock only) chooses the trajectory: the guest's RTC starts ``seed`` seconds after
    RTC_EPOCH, and the kernel gets ``numalab.seed=N``; both go into the guest kernel's random pool. The same
    kernel, topology, workload and seed give the same run (docs/qemu.md, "Runs that repeat exactly")."""

    mode: str = "host"
    shift: int = ICOUNT_SHIFT
    seed: int = 0
    quantum_ns: int = 0  # parallel guest time: each vCPU its own, at most this far ahead (0: one shared clock)
    insns_per_ns: int = 1  # instructions a vCPU executes in a guest ns (QEMU 0007's ipns; 1: stock icount)
    pause_ns: int = 0  # guest ns a PAUSE takes (QEMU 0009's pause; 0: stock icount, one instruction's time)

    @property
    def virtual(self) -> bool:
        return self.mode == "virtual"

    @property
    def insn_per_guest_s(self) -> float | None:
        """Instructions per guest second: all vCPUs together, or each vCPU's under parallel guest time (None for
        the host clock)."""
        return 1e9 * self.insns_per_ns / (1 << self.shift) if self.virtual else None

    def rtc_base(self) -> str:
        """The guest's RTC at power-on under the virtual clock: RTC_EPOCH plus the seed in seconds."""
        start = RTC_EPOCH + datetime.timedelta(seconds=self.seed)
        return start.strftime("%Y-%m-%dT%H:%M:%S")

    def accel_args(self) -> list[str]:
        """QEMU's TCG options for this clock. Under the virtual clock the RTC too starts at a fixed date (by
        the seed) and runs on the guest's clock (``clock=vm``): QEMU's default is the host's date and clock,
        which the guest reads at boot (its wall clock, its random pool) at a host-timed instant."""
        if self.virtual:
            quantum = f",quantum={self.quantum_ns}" if self.quantum_ns else ""
            ipns = f",ipns={self.insns_per_ns}" if self.insns_per_ns > 1 else ""
            pause = f",pause={self.pause_ns}" if self.pause_ns else ""
            return ["-accel", "tcg,thread=single", "-icount", f"shift={self.shift},sleep=off{quantum}{ipns}{pause}",
                    "-rtc", f"base={self.rtc_base()},clock=vm"]  # fmt: skip
        return ["-accel", "tcg,thread=multi"]

    def kernel_args(self) -> str:
        """The seed on the guest kernel's command line (virtual clock only), which the kernel mixes into its
        random pool."""
        return f"numalab.seed={self.seed}" if self.virtual else ""

    def to_dict(self) -> dict:
        if not self.virtual:
            return {"mode": "host"}
        out = {"mode": "virtual", "icount_shift": self.shift, "insn_per_guest_s": self.insn_per_guest_s,
               "shared_by": "the running vCPUs, in turn on one host thread", "seed": self.seed,
               "rtc_base": self.rtc_base()}  # fmt: skip
        if self.insns_per_ns > 1:
            out["insns_per_ns"] = self.insns_per_ns
        if self.pause_ns:
            out["pause_ns"] = self.pause_ns
        if self.quantum_ns:
            del out["shared_by"]
            out["parallel"] = {"quantum_ns": self.quantum_ns, "per": "vCPU: each its own guest time, at most the "
                               "quantum ahead of the slowest running one"}  # fmt: skip
        return out


def pause_ns_for(emulator: Any) -> int:
    """PAUSE_NS with a QEMU whose PAUSE can take guest time (numalab's patch 0009), else 0 (stock icount)."""
    return PAUSE_NS if emulator is not None and getattr(emulator, "pause_time", False) else 0


def check_quantum(quantum_ns: int, mode: str) -> None:
    """--quantum: a whole number of ns in QUANTUM_RANGE_NS (or 0: one clock shared by the vCPUs), with the virtual
    clock only."""
    if quantum_ns == 0:
        return
    if mode != "virtual":
        raise LabError("--quantum: only with --clock virtual (it divides the instruction counter's time by vCPU)")
    lo, hi = QUANTUM_RANGE_NS
    if not lo <= quantum_ns <= hi:
        raise LabError(f"--quantum: must be 0 (one shared clock) or {lo}..{hi} ns, got {quantum_ns}")


def check_insns_per_ns(insns_per_ns: int, mode: str) -> None:
    """--insns-per-ns: 1..INSNS_PER_NS_MAX, more than 1 with the virtual clock only."""
    if insns_per_ns == 1:
        return
    if mode != "virtual":
        raise LabError(
            "--insns-per-ns: only with --clock virtual (it sets how long an instruction takes in guest time)"
        )
    if not 1 <= insns_per_ns <= INSNS_PER_NS_MAX:
        raise LabError(f"--insns-per-ns: must be 1..{INSNS_PER_NS_MAX}, got {insns_per_ns}")


def check_parallel_time(quantum_ns: int, emulator: Any, insns_per_ns: int = 1) -> None:
    """--quantum needs a QEMU that gives each vCPU its own time (numalab's patch 0006: --qemu charge), and
    --insns-per-ns one that runs several instructions a guest ns (0007)."""
    if emulator is None:
        return
    if quantum_ns and not emulator.parallel_time:
        raise LabError(f"--quantum: QEMU {emulator.short_version} at {emulator.binary} has no parallel guest time "
                       "(numalab's patched QEMU: --qemu charge, make setup-qemu-charge)")  # fmt: skip
    if insns_per_ns > 1 and not emulator.fast_cpu:
        raise LabError(f"--insns-per-ns: QEMU {emulator.short_version} at {emulator.binary} runs one instruction a "
                       "guest ns at most (numalab's patched QEMU: --qemu charge, make setup-qemu-charge)")  # fmt: skip


def check(mode: str, backend: str, accel: str, qemu_version: tuple[int, int, int] | None) -> None:
    """One-line errors for a clock this run cannot have (``accel`` as asked: auto, kvm or tcg)."""
    if mode not in CLOCKS:
        raise LabError(f"--clock {mode}: expected one of {', '.join(CLOCKS)}")
    if mode == "host":
        return
    if backend != "qemu":
        raise LabError("--clock virtual: only with --backend qemu (the libvirt backend does not pass -icount)")
    if accel == "kvm":
        raise LabError("--clock virtual: needs TCG (under KVM the guest runs at the host's speed, in its time)")
    if qemu_version is not None and qemu_version[:2] < MIN_QEMU:
        have = ".".join(map(str, qemu_version))
        raise LabError(f"--clock virtual: QEMU {have}'s icount hangs SMP boots; use QEMU 10 "
                       "(make setup-qemu10, then --qemu backports)")  # fmt: skip

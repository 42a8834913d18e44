"""Kernel arguments for TCG guests: a reliable TSC, no timer check, no crypto self-tests, no delay-loop calibration.

**tsc=reliable.** QEMU's default x86 CPU is an AMD model without the
constant-TSC flag, so a guest kernel with more than one CPU assumes its TSCs
are not synchronized: it marks the TSC unstable and falls back to the HPET,
whose every read is an emulated MMIO access under TCG (timers, the
scheduler's clock, the trace clock). Under TCG the guest's TSC comes from one
host-wide tick counter, the same for every vCPU thread, so it is synchronized;
``tsc=reliable`` says so. Measured here (tests/bench/boot_floor.py, the same
QEMU command line with and without it, medians of 5, twice): about 0.1 s off
an idle 4-vCPU ring-4 run, within this machine's noise of about 0.2 s.

**no_timer_check.** While it sets up the IO-APIC, the kernel waits for
the timer interrupt to advance jiffies, in case the board wired it wrong.
QEMU's board is known to be right, and a KVM guest skips the check on its
own (arch/x86/kernel/kvm.c sets no_timer_check); a TCG guest, which does not
know it is virtual, waits. Measured here: about 0.09 s off the kernel's time
to init (medians of 9 boots, interleaved with boots without it).

**cryptomgr.notests.** Kernels with the crypto manager's self-tests (Debian's
stock kernel: CRYPTO_FIPS, RSA and DH built in; numalab's trimmed builds have
no crypto manager, so for them the argument changes nothing) run them at boot
in ``cryptomgr_test`` kthreads, work no scheduler experiment measures. Without
them an idle stock-kernel seed000-4node boot took 2.92 s against 3.56 s (host
time to init, means of 6 interleaved boots each). (It was first added for a
boot that stalled with CPU 7 in a self-test and the other vCPUs in
stop_machine; a later stall with no self-tests showed the vCPUs were not
running guest code at all: QEMU's TCG, handled by lab.run.request's boot deadline.)

**lpj=.** The TSC is still not constant, so every secondary CPU runs
``calibrate_delay_direct()`` while it comes up: about 0.15 s per vCPU, which
fails anyway and ends with the kernel's own hint, 'Consider using "lpj=" boot
option'. The boot CPU does not calibrate: it derives loops_per_jiffy from the
TSC frequency and prints it ("Calibrating delay loop (skipped), value
calculated using timer frequency.. (lpj=N)"). numalab learns that N from a
guest's dmesg (the whole line must be the kernel's, and N one that a real TSC
can give, ``LPJ_RANGE``: the guest's log is untrusted), per kernel image and host, and passes ``lpj=N`` on later TCG
boots of the same kernel. The value is the one the guest computes itself (TSC
kHz * 1000 / HZ), so udelay() stays right. A remote libvirt host has its own
TSC, so it gets its own entries (``host``).

**Under the virtual clock** (``--clock virtual``, ``-icount``) the guest's TSC is the virtual clock in
nanoseconds: exactly 1 GHz, whatever the host and ``--insns-per-ns``. So the guest is told
``tsc_early_khz=1000000`` (no PIT calibration) and, when the kernel's ``config`` lies beside its image (numalab's
builds and the stock kernel keep one), ``lpj=`` 10^9 / CONFIG_HZ, the value its boot CPU derives from that TSC.
Without it every secondary CPU's ``calibrate_delay_converge()`` counts loops against jiffies for about 0.45 s of
guest time, the most of a virtual-clock boot, and each of those guest seconds costs the host 1 G instructions
per ``--insns-per-ns``: measured (2026-11-27, two nodes of one vCPU, the baseline kernel, idle 1 s, host
time to the guest's init) 10.2 s at one instruction a ns and 31.6 s at 4, for 0.54 and 0.50 s of guest uptime.
Both values are fixed, so a seeded run still repeats exactly. A kernel without a config beside it gets no
``lpj=`` (and calibrates, slowly, as before).

Under KVM the kernel uses kvmclock and skips the calibration: nothing is added
there.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from lab.paths import cache_dir, json_text, write_text_atomic
from lab.vm.tcg import tcg_clock

_SKIPPED = re.compile(
    r"^\[[ \d.]+\] Calibrating delay loop \(skipped\), value calculated using timer frequency\.\. [\d.]+ BogoMIPS"
    r" \(lpj=(\d{1,10})\)$",
    re.MULTILINE,
)
# What the guest's dmesg says is the guest's word (the kernel is under test): only a loops_per_jiffy a
# real TSC can give is kept. TSC kHz * 1000 / HZ for 100 MHz..20 GHz and HZ 100..1000.
LPJ_RANGE = (100_000, 200_000_000)


def valid_lpj(lpj: object) -> bool:
    return isinstance(lpj, int) and not isinstance(lpj, bool) and LPJ_RANGE[0] <= lpj <= LPJ_RANGE[1]


CALIBRATION_FILE = "tcg-lpj.json"  # in numalab's cache: this host's own (lab.host.nested hides it)


def _key(kernel_image: Path, host: str) -> str:
    st = kernel_image.stat()
    key = f"{kernel_image.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    return f"{host} {key}" if host else key


def _load() -> dict[str, int]:
    try:
        data = json.loads((cache_dir() / CALIBRATION_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if valid_lpj(v)} if isinstance(data, dict) else {}


TCG_ARGS = "tsc=reliable no_timer_check cryptomgr.notests"
VIRTUAL_TSC_KHZ = 1_000_000  # under -icount the guest's TSC counts the virtual clock's nanoseconds
_HZ = re.compile(r"^CONFIG_HZ=(\d{1,5})$", re.MULTILINE)


def kernel_hz(config: Path | None) -> int | None:
    """CONFIG_HZ of a kernel config file, or None (no file, unreadable, no such line, or not 24..10000)."""
    if config is None:
        return None
    try:
        m = _HZ.search(config.read_text(errors="replace"))
    except OSError:
        return None
    hz = int(m.group(1)) if m else 0
    return hz if 24 <= hz <= 10_000 else None


def virtual_clock_args(config: Path | None) -> str:
    """``tsc_early_khz=`` the virtual clock's TSC, and ``lpj=`` from it when the kernel's HZ is known."""
    hz = kernel_hz(config)
    lpj = f" lpj={VIRTUAL_TSC_KHZ * 1000 // hz}" if hz else ""
    return f"tsc_early_khz={VIRTUAL_TSC_KHZ}{lpj}"


def boot_args(kernel_image: Path, accel: str, host: str = "", virtual_clock: bool = False,
              config: Path | None = None) -> str:  # fmt: skip
    """Extra kernel arguments for this boot: under TCG ``tsc=reliable no_timer_check cryptomgr.notests``,
    ``tsc_early_khz=`` (lab.vm.tcg.tcg_clock) and ``lpj=N`` once they are known. ``host``: "" for this
    machine, else the remote host's libvirt URI. Under the virtual clock (lab.vm.tcg.guest_clock) the TSC counts
    the virtual clock's nanoseconds, not the host's cycles: neither the host's TSC frequency nor a learned lpj
    applies; the 1 GHz TSC and, with the kernel's ``config`` (its HZ), its lpj do."""
    if accel != "tcg":
        return ""
    if virtual_clock:
        return f"{TCG_ARGS} {virtual_clock_args(config)}"
    lpj = _load().get(_key(kernel_image, host))
    fixed = " ".join(filter(None, (TCG_ARGS, tcg_clock.clock_args(host))))
    return f"{fixed} lpj={lpj}" if lpj else fixed


def learn(kernel_image: Path, accel: str, dmesg: str, host: str = "") -> int | None:
    """Remember the boot CPU's loops_per_jiffy from a TCG guest's dmesg (a boot without lpj=)."""
    if accel != "tcg":
        return None
    tcg_clock.learn(dmesg, host)  # the TSC frequency (tsc_early_khz=), from a boot that calibrated it soundly
    m = _SKIPPED.search(dmesg)
    if not m:
        return None
    lpj = int(m.group(1))
    if not valid_lpj(lpj):
        return None
    data = _load()
    key = _key(kernel_image, host)
    if data.get(key) == lpj:
        return lpj
    data[key] = lpj
    write_text_atomic(cache_dir() / CALIBRATION_FILE, json_text(data, indent=1, sort_keys=True) + "\n")
    return lpj

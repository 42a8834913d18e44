"""A TCG guest's TSC frequency, learned once and passed on (``tsc_early_khz=``), and a miscalibrated one detected.

Under TCG the guest's TSC is the host's tick counter, so its frequency is
the host's. The guest kernel does not know it: it calibrates the TSC at boot
against the emulated PIT and HPET, and trusts the PIT when the two disagree.
On a loaded host the emulated PIT can be badly off: seen here, on a host
shared with other VMs, "tsc: PIT calibration deviates from HPET: 44453
2298615" and then "Detected 44.453 MHz processor", so the guest's clock
(``tsc=reliable``: no watchdog corrects it) ran 50 times too fast and a
"15 s" workload was over in a fraction of a second of host time; 5 of 44
runs of one reproduction were hit, with guest clocks 4 to 50 times fast.

numalab learns the frequency from a boot that calibrated against the HPET
(the guest says "using HPET reference calibration", or refined it against a
clocksource) with no PIT disagreement, once per host, and passes
``tsc_early_khz=N`` on later TCG boots: the kernel then uses N and skips the
early calibration (its later refinement against a clocksource may still
replace N, but only by a value within 1% of it). A boot that still trusted a deviating PIT is reported by
:func:`clock_problem`, which names both frequencies.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from lab.paths import TOOL_TEXT, cache_dir, json_text, write_text_atomic

CALIBRATION_FILE = "tcg-tsc.json"  # in numalab's cache: this host's own (lab.host.nested hides it)
_DETECTED = re.compile(r"tsc: Detected (\d{1,9}\.\d{1,9}) MHz processor")
_REFINED = re.compile(r"tsc: Refined TSC clocksource calibration: (\d{1,9}\.\d{1,9}) MHz")
_DEVIATES = re.compile(r"tsc: PIT calibration deviates from HPET: (\d{1,12}) (\d{1,12})")
KHZ_RANGE = (100_000, 20_000_000)  # 100 MHz .. 20 GHz


def _load() -> dict[str, int]:
    try:
        data = json.loads((cache_dir() / CALIBRATION_FILE).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, int) and KHZ_RANGE[0] <= v <= KHZ_RANGE[1]}


def trusted_khz(dmesg: str) -> int | None:
    """The TSC kHz of a boot that calibrated against the HPET (or refined it) without a PIT disagreement."""
    if _DEVIATES.search(dmesg):
        return None
    m = _REFINED.search(dmesg)
    if m is None and "tsc: using HPET reference calibration" in dmesg:
        m = _DETECTED.search(dmesg)
    if m is None:
        return None
    khz = round(float(m.group(1)) * 1000)
    return khz if KHZ_RANGE[0] <= khz <= KHZ_RANGE[1] else None


def host_tsc_khz(dmesg: str | None = None) -> int | None:
    """This machine's TSC kHz from its own kernel log (refined if it refined it), or None if unreadable.
    Remembered per boot of this machine (``boot_id``): running dmesg costs milliseconds on every run."""
    if dmesg is None:
        try:
            boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        except OSError:
            boot = ""
        key = f"host {boot}"
        known = _load()
        if boot and key in known:
            return known[key]
        try:
            dmesg = subprocess.run(["dmesg"], capture_output=True, **TOOL_TEXT, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        khz = host_tsc_khz(dmesg)
        if khz and boot:
            data = {k: v for k, v in known.items() if not k.startswith("host ")} | {key: khz}
            write_text_atomic(cache_dir() / CALIBRATION_FILE, json_text(data, indent=1, sort_keys=True) + "\n")
        return khz
    found = list(_REFINED.finditer(dmesg)) or list(_DETECTED.finditer(dmesg))
    if not found:
        return None
    khz = round(float(found[-1].group(1)) * 1000)
    return khz if KHZ_RANGE[0] <= khz <= KHZ_RANGE[1] else None


def clock_args(host: str = "") -> str:
    """``tsc_early_khz=N`` once the TSC frequency is known, else ''. On this machine that is its own
    kernel's figure when it can be read (the guest's word is the word of a kernel under test); else,
    and for a remote libvirt host, the one learned from a sound guest calibration."""
    khz = (host_tsc_khz() if not host else None) or _load().get(host or "local")
    return f"tsc_early_khz={khz}" if khz else ""


def learn(dmesg: str, host: str = "") -> int | None:
    """Remember the host's TSC kHz from a TCG guest's dmesg, if the guest calibrated it soundly."""
    khz = trusted_khz(dmesg)
    if khz is None:
        return None
    if not host and (own := host_tsc_khz()) and abs(khz - own) > 0.02 * own:
        return None  # not this machine's TSC: a guest (a kernel under test) said something else
    data = _load()
    key = host or "local"
    if key not in data:
        data[key] = khz
        write_text_atomic(cache_dir() / CALIBRATION_FILE, json_text(data, indent=1, sort_keys=True) + "\n")
    return data[key]


def clock_problem(dmesg: str) -> str | None:
    """Why the guest's clock cannot be trusted (it took a PIT value the HPET contradicts by > 5%), or None."""
    m = _DEVIATES.search(dmesg)
    if not m or "tsc: Using PIT calibration value" not in dmesg:
        return None
    pit, hpet = int(m.group(1)), int(m.group(2))
    if pit <= 0 or abs(hpet - pit) <= 0.05 * hpet:
        return None
    return (f"guest TSC calibrated at {pit / 1000:.1f} MHz against the PIT while the HPET said {hpet / 1000:.1f} MHz:"
            f" the guest clock ran {hpet / pit:.1f}x too fast")  # fmt: skip

"""7.x's cache-aware scheduling in a run's record: what the kernel said at boot, its ``llc_balancing`` knobs at the
workload's start and end, each LLC's size as cacheinfo gives it, and the prediction
(lab.topology.predictions.cache_aware).

The prediction is of the hardware switch: ``enabling`` and ``disabling`` (a kernel whose user switch defaults to 0)
both say the machine has it. The kernel's line comes from the boot log (``sched_verbose``, on every numalab
guest's command line): the last of ``enabling cache aware scheduling``, ``disabling cache aware scheduling`` and
``cache aware scheduling not supported on this platform``. A kernel built without ``CONFIG_SCHED_CACHE`` (every
kernel before 7.x) has no such line and no ``llc_balancing/`` directory: its record says ``configured: false``
and nothing is predicted. A cache-aware kernel that says otherwise than predicted is a topology problem of the
run, as a domain that is not predicted is.
"""

from __future__ import annotations

import re
from pathlib import Path

from lab.record_files import DMESG_BOOT, KNOBS, LLC_BALANCING_END
from lab.topology.model.topology import Topology
from lab.topology.predictions.cache_aware import DISABLING, ENABLING, NOT_SUPPORTED, predict_sched_cache
from lab.topology.predictions.cpu_view import ALL_LEVELS
from lab.untrusted import read_guest_text, shown, to_int

_SAYS = re.compile(r"(?:(enabling|disabling) cache aware scheduling|cache aware scheduling (not supported) on this "
                   r"platform)\s*$")  # fmt: skip
_KNOB = re.compile(r"llc_balancing/([a-z_]{1,32})[ :]\s*(-?\d{1,12})\s*$")
CONFIG = "CONFIG_SCHED_CACHE"


def kernel_says(dmesg: str) -> str | None:
    """The last cache-aware line of a boot log: ``enabling``, ``disabling`` or ``not supported``; None without one."""
    said = None
    for line in dmesg.splitlines():
        m = _SAYS.search(line)
        if m:
            said = {"enabling": ENABLING, "disabling": DISABLING}.get(m.group(1) or "", NOT_SUPPORTED)
    return said


def read_llc_balancing(text: str, problems: list[str], where: str) -> dict[str, int]:
    """``llc_balancing/NAME VALUE`` lines (knobs.txt; llc-balancing.end) as NAME -> value; a line of that
    directory that is not a number is named in ``problems``."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        if not line.startswith("llc_balancing/"):
            continue
        m = _KNOB.match(line)
        value = to_int(m.group(2)) if m else None
        if m is None or value is None:
            problems.append(f"{where} line {n}: {shown(line)} is not an llc_balancing value")
            continue
        out[m.group(1)] = value
    return out


def configured(config_text: str | None) -> bool | None:
    """Whether the kernel's .config has cache-aware scheduling; None when its config is not known."""
    if config_text is None:
        return None
    return f"{CONFIG}=y" in config_text.splitlines()


def llc_sizes(cpus: dict | None) -> dict[str, str]:
    """Each LLC's size as the guest's cacheinfo gave it: the LLC's cpulist -> size (``32768K``)."""
    out: dict[str, str] = {}
    for c in ((cpus or {}).get("cpus") or {}).values():
        sizes, shared = c.get("cache_sizes") or {}, c.get("caches") or {}
        llc = max((k for k in sizes if k in shared), key=lambda k: (k[1:2], k), default=None)
        if llc is not None:
            out[shared[llc]] = sizes[llc]
    return dict(sorted(out.items()))


def sched_cache_view(topo: Topology, run_dir: Path, config_text: str | None, cpus: dict | None,
                     levels: frozenset[str] = ALL_LEVELS, problems: list[str] | None = None) -> dict:  # fmt: skip
    """The record's ``sched_cache``: {configured, predicted, kernel, start, end, llc_sizes}; a cache-aware kernel
    that says other than predicted adds a line to ``problems``."""
    problems = [] if problems is None else problems
    data: list[str] = []
    has = configured(config_text)
    says = kernel_says(read_guest_text(run_dir / DMESG_BOOT, data) or "")
    start = read_llc_balancing(read_guest_text(run_dir / KNOBS, data) or "", data, KNOBS)
    end_text = read_guest_text(run_dir / LLC_BALANCING_END, data) if (run_dir / LLC_BALANCING_END).exists() else ""
    end = read_llc_balancing(end_text or "", data, LLC_BALANCING_END)
    predicted = predict_sched_cache(topo, levels) if has or (has is None and says) else None
    # "disabling" is a machine that has it with the user switch off (a tree whose default is 0): present all the same
    present = None if says is None else (ENABLING if says in (ENABLING, DISABLING) else NOT_SUPPORTED)
    if predicted is not None and present is not None and present != predicted:
        problems.append(f"cache-aware scheduling: the kernel says {says!r} ({DMESG_BOOT}), numalab predicted "
                        f"{predicted!r} for {topo.name}")  # fmt: skip
    elif has and says is None:  # (a boot log that wrapped loses it: said in the record, not a topology problem)
        data.append(f"{DMESG_BOOT}: the kernel has {CONFIG}=y but its boot log does not say whether cache-aware "
                    "scheduling is on")  # fmt: skip
    out = {"configured": has, "predicted": predicted, "kernel": says, "start": start, "end": end,
           "llc_sizes": llc_sizes(cpus)}  # fmt: skip
    if data:
        out["problems"] = data
    return out

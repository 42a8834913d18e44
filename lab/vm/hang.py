"""Where a VM was when its time ran out: QEMU's run state and every vCPU's instruction pointer.

A guest that boots with ``loglevel=4`` prints nothing on its console until
init runs, so a boot that hangs leaves an empty console: "timeout (it never
booted)" and no clue whether QEMU never started the vCPUs (a lab bug), the
vCPUs sit halted in the idle loop waiting for an interrupt that never comes
(a timer or IPI problem), or one of them spins somewhere in the kernel. Just
before the VM is killed, numalab asks QEMU's monitor (QMP; for a libvirt domain,
its state and libvirt's monitor passthrough) for its run state (``query-status``)
and the registers of every vCPU (``info registers -a``)
and keeps each vCPU's RIP and halted flag; with the kernel's System.map
(shipped next to stock and built kernel images) each RIP is named
``function+0xoffset``. Direct PVH boots do not relocate the kernel (no KASLR:
the decompressor that would do it never runs), so System.map's addresses are
the running ones.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.vm.qemu.qmp import QemuGone, Qmp

_CPU = re.compile(r"^CPU#(\d+)", re.MULTILINE)
_IP = re.compile(r"\b(?:RIP=([0-9a-f]{16})|EIP=([0-9a-f]{8}))\b")  # long mode, or 32-bit/real (firmware)
_HLT = re.compile(r"\bHLT=([01])\b")


def parse_registers(text: str) -> list[dict]:
    """``info registers -a`` -> [{"cpu": N, "rip": "ffff...", "halted": bool}] in CPU order (``rip`` is
    EIP's 8 digits for a vCPU not yet in long mode: still in the firmware or the kernel's entry)."""
    starts = [(int(m.group(1)), m.start()) for m in _CPU.finditer(text)]
    out = []
    for i, (cpu, start) in enumerate(starts):
        block = text[start : starts[i + 1][1] if i + 1 < len(starts) else len(text)]
        ip, hlt = _IP.search(block), _HLT.search(block)
        if ip:
            out.append({"cpu": cpu, "rip": ip.group(1) or ip.group(2), "halted": bool(hlt and hlt.group(1) == "1")})
    return out


def vm_state(qmp_socket: str | Path, alive: Callable[[], bool], timeout_s: float = 5.0) -> dict | None:
    """{"status": QEMU's run state, "vcpus": [...]} from the still-running QEMU, or None if its monitor
    does not answer (a diagnosis is best effort: it never turns a result into an error)."""
    try:
        qmp = Qmp(qmp_socket, timeout=timeout_s, alive=alive)
    except (QemuGone, LabError, OSError):
        return None
    try:
        status = qmp.command("query-status") or {}
        regs = qmp.command("human-monitor-command", **{"command-line": "info registers -a"})
        return {"status": status.get("status", "?"), "vcpus": parse_registers(regs if isinstance(regs, str) else "")}
    except (LabError, OSError, ValueError):
        return None
    finally:
        qmp.close()


def symbolize(state: dict, system_map: Path | None) -> dict:
    """``state`` with each vCPU's ``symbol`` (function+0xoffset) from ``system_map`` when there is one."""
    if not system_map or not system_map.is_file():
        return state
    addrs: list[int] = []
    names: list[str] = []
    try:
        with open(system_map, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] in "tTwW" and len(parts[0]) == 16:
                    addrs.append(int(parts[0], 16))
                    names.append(parts[2])
    except (OSError, ValueError):
        return state
    order = sorted(range(len(addrs)), key=addrs.__getitem__)
    addrs = [addrs[i] for i in order]
    names = [names[i] for i in order]
    for v in state.get("vcpus", []):
        rip = int(v["rip"], 16)
        i = bisect.bisect_right(addrs, rip) - 1
        if i >= 0 and rip - addrs[i] < 1 << 20:
            v["symbol"] = f"{names[i]}+{rip - addrs[i]:#x}"
    return state


def describe(state: dict | None) -> str:
    """One line: 'QEMU running; vCPUs: 0-6 halted at default_idle+0x1e, 7 at foo+0x10'."""
    if not state:
        return "QEMU did not say where"
    groups: dict[str, list[int]] = {}
    for v in state.get("vcpus", []):
        where = v.get("symbol") or v["rip"]
        groups.setdefault(("halted at " if v["halted"] else "at ") + where, []).append(v["cpu"])
    parts = [f"{format_cpulist(cpus)} {where}" for where, cpus in groups.items()]
    return f"QEMU {state.get('status', '?')}; vCPUs: " + ("; ".join(parts) if parts else "no registers")

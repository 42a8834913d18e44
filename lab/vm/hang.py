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

A RIP alone does not tell a guest that spins from an emulator that stopped
running it: under TCG a vCPU that loops inside one translated block shows the
same RIP at every look, and so does one whose thread QEMU no longer runs. So
the vCPU threads' CPU time is read twice, ``BUSY_WINDOW_S`` apart (the host's
schedstat for direct QEMU, libvirt's vCPU times for a domain), and each vCPU
gets ``busy``: the share of that second its thread ran. :func:`kind` sorts
the hang from that: ``guest-spinning`` (a vCPU that is not halted ran),
``guest-idle`` (every vCPU halted: the guest waits for an interrupt that never
comes), or ``emulator-stalled`` (vCPUs not halted whose threads did not run:
QEMU's TCG stopped running the guest, as it does now and then at boot).
"""

from __future__ import annotations

import bisect
import re
import time
from collections.abc import Callable
from pathlib import Path

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.vm.qmp import QemuGone, Qmp
from lab.vm.vcpu_time import read_schedstat

_CPU = re.compile(r"^CPU#(\d+)", re.MULTILINE)
_IP = re.compile(r"\b(?:RIP=([0-9a-f]{16})|EIP=([0-9a-f]{8}))\b")  # long mode, or 32-bit/real (firmware)
_HLT = re.compile(r"\bHLT=([01])\b")
BUSY_WINDOW_S = 1.0
# A vCPU thread that ran less than this share of the window did not run the guest: a host so loaded that a
# runnable thread gets under 5% of a CPU for a whole second is itself a finding (the load is recorded).
IDLE_BELOW = 0.05


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


def busy_shares(before: dict[int, int], after: dict[int, int], seconds: float) -> dict[int, float]:
    """vCPU index -> the share of ``seconds`` its thread ran, from two readings of CPU time in ns (a vCPU
    missing from either reading gets none)."""
    if seconds <= 0:
        return {}
    return {v: round(min(max((after[v] - before[v]) / 1e9 / seconds, 0.0), 1.0), 3) for v in before if v in after}


def add_busy(state: dict, busy: dict[int, float]) -> dict:
    """``state`` with each vCPU's ``busy`` share and the hang's ``kind`` (when the shares are known)."""
    for v in state.get("vcpus", []):
        if v["cpu"] in busy:
            v["busy"] = busy[v["cpu"]]
    state["kind"] = kind(state)
    return state


def kind(state: dict | None) -> str | None:
    """guest-spinning | guest-idle | emulator-stalled, or None when the vCPUs' CPU time is not known."""
    vcpus = (state or {}).get("vcpus", [])
    if not vcpus or any("busy" not in v for v in vcpus):
        return None
    running = [v for v in vcpus if not v["halted"]]
    if not running:
        return "guest-idle"
    return "guest-spinning" if any(v["busy"] >= IDLE_BELOW for v in running) else "emulator-stalled"


def _thread_times(pid: int, tids: dict[int, int]) -> dict[int, int]:
    """vCPU index -> its thread's CPU ns (a thread that runs several vCPUs counts for each of them)."""
    out = {}
    for vcpu, tid in tids.items():
        t = read_schedstat(pid, tid)
        if t is not None:
            out[vcpu] = t.run_ns
    return out


def vm_state(
    qmp_socket: str | Path, alive: Callable[[], bool], timeout_s: float = 5.0, pid: int | None = None
) -> dict | None:
    """{"status": QEMU's run state, "vcpus": [...], "kind": ...} from the still-running QEMU, or None if its
    monitor does not answer (a diagnosis is best effort: it never turns a result into an error). With QEMU's
    ``pid``, each vCPU's ``busy`` share over ``BUSY_WINDOW_S`` from its thread's schedstat."""
    try:
        qmp = Qmp(qmp_socket, timeout=timeout_s, alive=alive)
    except (QemuGone, LabError, OSError):
        return None
    try:
        status = qmp.command("query-status") or {}
        tids = qmp.vcpu_threads() if pid is not None else {}
        before, t0 = (_thread_times(pid, tids), time.monotonic()) if pid is not None else ({}, 0.0)
        regs = qmp.command("human-monitor-command", **{"command-line": "info registers -a"})
        state = {"status": status.get("status", "?"), "vcpus": parse_registers(regs if isinstance(regs, str) else "")}
        if pid is not None and before:
            time.sleep(max(0.0, BUSY_WINDOW_S - (time.monotonic() - t0)))
            add_busy(state, busy_shares(before, _thread_times(pid, tids), time.monotonic() - t0))
        return state
    except (LabError, OSError, ValueError, KeyError, TypeError):
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
    line = f"QEMU {state.get('status', '?')}; vCPUs: " + ("; ".join(parts) if parts else "no registers")
    k = state.get("kind")
    if k == "emulator-stalled":
        line += f"; their threads did not run for {BUSY_WINDOW_S:g} s: QEMU stopped running the guest"
    elif k == "guest-spinning":
        busy = [v["cpu"] for v in state["vcpus"] if not v["halted"] and v["busy"] >= IDLE_BELOW]
        line += f"; {format_cpulist(busy)} busy: the guest spins"
    elif k == "guest-idle":
        line += "; all halted: the guest waits for an interrupt"
    return line

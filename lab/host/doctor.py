"""``numalab doctor``: the accelerator verdict, tool versions and the host's NUMA inventory."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from lab.errors import LabError
from lab.host.accel import accel_verdict
from lab.kernel.stock import fetch_stock
from lab.placement.host_inventory import read_inventory
from lab.vm.libvirt.libvirt_conn import close_quietly, connect
from lab.vm.libvirt.libvirt_hostspec import HostSpec, check_host
from lab.vm.libvirt.libvirt_leftovers import clean as clean_leftovers
from lab.vm.libvirt.libvirt_leftovers import leftovers
from lab.vm.qemu.emulator import DEFAULT_QEMU, Emulator, private_prefixes
from lab.vm.qemu.emulator import resolve as resolve_emulator
from lab.vm.qemu.firmware import find_qboot
from lab.vm.qemu.qemu_backend import QemuBackend

TOOLS = {
    "libvirtd": ["libvirtd", "--version"],
    "virsh": ["virsh", "--version"],
    "trace-cmd": ["trace-cmd", "--version"],
    "perf": ["perf", "--version"],
    "busybox": ["busybox"],
}


def tool_version(cmd: list[str]) -> str | None:
    if not shutil.which(cmd[0]):
        return None
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (res.stdout or res.stderr).strip()
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "") or None


def emulators(chosen: Emulator) -> list[dict]:
    """The QEMUs numalab can run: the chosen one first, the system's, and those unpacked into its cache
    (make setup-qemu10), each with its version and where its qboot comes from."""
    found: dict[str, Emulator] = {chosen.binary: chosen}
    candidates = [DEFAULT_QEMU, *(str(p / "usr" / "bin" / DEFAULT_QEMU) for p in private_prefixes())]
    for c in candidates:
        try:
            e = resolve_emulator(c)
        except LabError:
            continue
        found.setdefault(e.binary, e)
    return [e.to_dict() | {"chosen": e is chosen, "qboot": find_qboot(e.firmware_dirs)} for e in found.values()]


def libvirt_report(uri: str, clean: bool = False) -> dict:
    """The libvirt host behind ``uri``: reachable (else a one-line LabError), versions, numalab-* leftovers."""
    host = HostSpec(uri)
    conn = connect(uri)
    try:
        report = check_host(host) | {"leftovers": leftovers(conn, host)}
        if clean:
            report["cleaned"] = clean_leftovers(conn, host)
            report["leftovers"] = leftovers(conn, host)
        return report
    finally:
        close_quietly(conn)


def doctor_report(
    refresh: bool = False,
    progress: Callable[[str], None] | None = None,
    connect: str | None = None,
    clean: bool = False,
    qemu: str = "",
) -> dict:
    say = progress or (lambda _m: None)
    libvirt = libvirt_report(connect, clean) if connect else None
    emulator = resolve_emulator(qemu)
    say("fetching the stock kernel for the probe (cached after the first time)")
    kernel = fetch_stock()
    say(f"probing KVM with a real guest boot on QEMU {emulator.short_version}"
        + ("" if refresh else " (or using the cached verdict)"))  # fmt: skip
    verdict = accel_verdict(kernel / "vmlinuz", QemuBackend(emulator), refresh=refresh)
    report = {
        "accelerator": verdict,
        "emulators": emulators(emulator),
        "tools": {name: tool_version(cmd) for name, cmd in TOOLS.items()},
        "host": read_inventory().to_dict(),
    }
    if libvirt is not None:
        report["libvirt"] = libvirt
    return report


def print_doctor(report: dict) -> None:
    v = report["accelerator"]
    cached = " (cached verdict; --refresh to probe again)" if v.get("cached") else ""
    print(f"accelerator: {v['accel'].upper()}{cached}")
    print(f"  kvm: {'usable' if v['kvm']['ok'] else 'UNUSABLE'} - {v['kvm']['detail']}")
    if v.get("tcg"):
        print(f"  tcg: {'usable' if v['tcg']['ok'] else 'UNUSABLE'} - {v['tcg']['detail']}")
    if v.get("warning"):
        print(f"warning: {v['warning']}")
    print("emulators:")
    for e in report["emulators"]:
        mark = "*" if e["chosen"] else " "
        print(f" {mark} QEMU {e['version']:<8} {e['binary']}  qboot {e['qboot'] or 'none'}")
    print("tools:")
    for name, ver in report["tools"].items():
        print(f"  {name:<10} {ver or 'not found'}")
    host = report["host"]
    print(
        f"host NUMA: {len(host['nodes'])} node(s), {len(host['online_cpus'])} CPUs, "
        f"{host['mem_available_mib']} MiB available"
    )
    for n in host["nodes"]:
        huge = ", ".join(f"{k}kB:{v} free" for k, v in sorted(n["hugepages_free"].items())) or "none"
        cpus = ",".join(map(str, n["cpus"]))
        print(
            f"  node {n['id']}: cpus {cpus}  {n['mem_available_mib']}/{n['mem_total_mib']} MiB free  hugepages {huge}"
        )
    print_host_distances(host)
    if "libvirt" in report:
        print_libvirt(report["libvirt"])


def print_host_distances(host: dict) -> None:
    """The host's SLIT, and what it means for the guests' distances numalab emulates on it."""
    d = host.get("distances") or []
    ids = [n["id"] for n in host["nodes"]]
    if len(ids) < 2:
        print("  one host node: every guest distance is emulated (the guest's remote memory is local here)")
        return
    if len(d) != len(ids):
        print("  host SLIT: not known")
        return
    print("  host SLIT:  " + " ".join(f"{i:>4}" for i in ids))
    for i, row in zip(ids, d):
        print(f"    node {i:<4}" + " ".join(f"{v:>4}" for v in row))
    print(
        f"  guest nodes are spread round-robin over these {len(ids)} nodes: a guest distance between nodes on "
        "different host nodes is backed by the host distance above; guest nodes that share a host node have "
        "local memory between them (a run's placement notes name those pairs)"
    )


def print_libvirt(lv: dict) -> None:
    print(
        f"libvirt: {lv['uri']} on {lv['hostname']}: libvirt {lv['libvirt']}, QEMU {lv['hypervisor']}, "
        f"{lv['nodes']} node(s), {lv['cpus']} CPUs, {lv['mem_available_mib']} MiB available, pool dir {lv['pool_dir']}"
    )
    cleaned = lv.get("cleaned")
    if cleaned:
        for kind in ("domains", "pools", "volumes"):
            for name in cleaned[kind]:
                print(f"  removed {kind[:-1]} {name}")
        for p in cleaned["problems"]:
            print(f"  could not clean: {p}")
    left = lv["leftovers"]
    live = set(left["live"])
    for d in left["domains"]:
        state = "running" if d["running"] else "defined, shut off"
        owner = d["owner"]
        who = f", owner pid {owner['pid']} on {owner['host']}" if owner else ""
        tag = " (its numalab run is still going: kept)" if d["name"] in live else ""
        print(f"  leftover domain {d['name']}: {state}{' (persistent)' if d['persistent'] else ''}{who}{tag}")
    for name in left["pools"]:
        print(f"  leftover pool {name}")
    for name in left["volumes"]:
        print(f"  leftover volume {name}")
    stale = [d for d in left["domains"] if d["name"] not in live] or left["pools"] or left["volumes"]
    if stale:
        print(f"  remove them with: numalab doctor --connect {lv['uri']} --clean")
    elif not left["domains"]:
        print("  no leftover numalab-* domains")

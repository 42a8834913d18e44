"""``numalab doctor``: the accelerator verdict, tool versions and the host's NUMA inventory."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable

from lab.host.accel import accel_verdict
from lab.host.inventory import read_inventory
from lab.kernel.stock import fetch_stock

TOOLS = {
    "qemu": ["qemu-system-x86_64", "--version"],
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


def doctor_report(refresh: bool = False, progress: Callable[[str], None] | None = None) -> dict:
    say = progress or (lambda _m: None)
    say("fetching the stock kernel for the probe (cached after the first time)")
    kernel = fetch_stock()
    say("probing KVM with a real guest boot" + ("" if refresh else " (or using the cached verdict)"))
    verdict = accel_verdict(kernel / "vmlinuz", refresh=refresh)
    return {
        "accelerator": verdict,
        "tools": {name: tool_version(cmd) for name, cmd in TOOLS.items()},
        "host": read_inventory().to_dict(),
    }


def print_doctor(report: dict) -> None:
    v = report["accelerator"]
    cached = " (cached verdict; --refresh to probe again)" if v.get("cached") else ""
    print(f"accelerator: {v['accel'].upper()}{cached}")
    print(f"  kvm: {'usable' if v['kvm']['ok'] else 'UNUSABLE'} - {v['kvm']['detail']}")
    if v.get("tcg"):
        print(f"  tcg: {'usable' if v['tcg']['ok'] else 'UNUSABLE'} - {v['tcg']['detail']}")
    if v.get("warning"):
        print(f"warning: {v['warning']}")
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

"""QEMU 7.2 (the system's) against QEMU 10 (make setup-qemu10), side by side: idle boot and numa01 throughput.

    .venv/bin/python tests/bench/qemu_versions.py [REPEATS] [DURATION_S]      (defaults: 6 and 8)

Runs alternate ABBA (a VM run leaves the host slower for the next one), on ring-4 with 1 vCPU per node and
256 MiB a node, TCG, the stock kernel. Prints medians: the idle run's boot (host seconds to the guest's
"booted"), numa01's GB/s and, where the run recorded it, GB per vCPU CPU-second. Figures, not a test: these
machines are noisy, and other VMs on the host change them.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's lab, whatever the venv's editable install points at
TOPO = ["--topology", "ring-4", "--cpus-per-node", "1", "--mem-per-node", "256M", "--accel", "tcg"]


def run(out: Path, qemu: str, *args: str) -> dict | None:
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--qemu", qemu, *TOPO, *args, "--out", str(out),
                           "--json"], capture_output=True, text=True, cwd=REPO, timeout=600)  # fmt: skip
    try:
        m = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None
    return m if m.get("status") == "ok" else None


def gbps_per_vcpu_s(m: dict) -> float | None:
    """The run's GB per vCPU CPU-second (the manifest's metrics.per_vcpu_s)."""
    return ((m.get("metrics") or {}).get("per_vcpu_s") or {}).get("gbps_per_vcpu_s")


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    duration = sys.argv[2] if len(sys.argv) > 2 else "8"
    from lab.host.qemu_prefix import fetch
    from lab.vm.qemu.emulator import resolve

    q10 = str(fetch(say=lambda _m: None))
    sides = {"7.2": "system", "10.0": q10}
    for name, q in sides.items():
        print(f"QEMU {name}: {resolve(q).version}")
    figures: dict[str, dict[str, list[float]]] = {n: {"boot_s": [], "gbps": [], "per_vcpu_s": []} for n in sides}
    failed = {n: 0 for n in sides}
    order = [n for i in range(repeats) for n in (list(sides) if i % 2 == 0 else list(sides)[::-1])]
    with tempfile.TemporaryDirectory(prefix="numalab-bench-") as tmp:
        for i, name in enumerate(order):
            idle = run(Path(tmp) / f"idle{i}", sides[name], "--workload", "idle", "--duration", "0.1")
            work = run(Path(tmp) / f"numa01-{i}", sides[name], "--workload", "numa01", "--duration", duration)
            if idle is None or work is None:
                failed[name] += 1
                continue
            figures[name]["boot_s"].append(idle["timings"]["boot_s"])
            gbps = (work["workload"].get("result") or {}).get("gbps")
            if gbps is not None:
                figures[name]["gbps"].append(gbps)
            per = gbps_per_vcpu_s(work)
            if per is not None:
                figures[name]["per_vcpu_s"].append(per)
            print(f"  {i + 1}/{len(order)} QEMU {name}: boot {idle['timings']['boot_s']}s  numa01 {gbps} GB/s",
                  flush=True)  # fmt: skip
    print(f"\nmedians over {repeats} runs a side (ring-4, 4 vCPUs, TCG, stock kernel, numa01 {duration} s):")
    print(f"{'':10}{'idle boot s':>14}{'numa01 GB/s':>14}{'GB/vCPU-s':>12}{'failed':>8}")
    for name, f in figures.items():
        med = {k: (f"{statistics.median(v):.3g}" if v else "-") for k, v in f.items()}
        print(f"QEMU {name:<5}{med['boot_s']:>14}{med['gbps']:>14}{med['per_vcpu_s']:>12}{failed[name]:>8}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

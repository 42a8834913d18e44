"""What --clock virtual changes: guest-measured throughput and NUMA-balancing work per GB, quiet and under load.

    .venv/bin/python tests/bench/virtual_clock.py [REPEATS] [DURATION_S] [WORKLOAD]   (defaults: 3, 5, numa01)

For each guest clock (host, virtual) and each host condition (quiet; a busy process on every host core),
REPEATS runs of WORKLOAD on ring-2 (1 vCPU a node, 256 MiB a node, TCG, the stock kernel, NUMA balancing
on). The host clock runs QEMU 10 (backports). The virtual clock runs numalab's patched QEMU when it is
built (make setup-qemu-charge; its runs repeat exactly), else QEMU 10, and repeat i has `--seed i` in both
host conditions: each condition sees the same trajectories, and the CoeffVar is their spread, as in an A/B.
Prints per cell the median and CoeffVar of the guest-measured GB/s (work per guest second), NUMA PTE
updates (scan work) per GB written, the host seconds a run took, and the ratio quiet/loaded of the
medians. Under the host clock the guest's figures move with host load; under the virtual clock they
should not. Figures, not a test: "quiet" here still shares the host with whatever else runs on it.
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
TOPO = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--accel", "tcg"]


def one(out: Path, qemu: str, clock: str, workload: str, duration: str, seed: int) -> dict | None:
    seeded = ["--seed", str(seed)] if clock == "virtual" else []
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "run", "--qemu", qemu, "--clock", clock, *TOPO, *seeded,
                           "--workload", workload, "--duration", duration, "--out", str(out), "--json"],
                          capture_output=True, text=True, cwd=REPO, timeout=1800)  # fmt: skip
    try:
        m = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None
    if m.get("status") != "ok":
        return None
    r = m["workload"]["result"]
    gb = (r.get("bytes_touched") or 0) / 1e9
    pte = (m.get("metrics", {}).get("vmstat") or {}).get("numa_pte_updates")
    return {"gbps": r.get("gbps"), "pte_per_gb": pte / gb if pte is not None and gb else None,
            "host_s": m["timings"]["total_s"]}  # fmt: skip


def cv(values: list[float]) -> str:
    if len(values) < 2 or not statistics.mean(values):
        return "-"
    return f"{100 * statistics.stdev(values) / statistics.mean(values):.1f}%"


def med(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    duration = sys.argv[2] if len(sys.argv) > 2 else "5"
    workload = sys.argv[3] if len(sys.argv) > 3 else "numa01"
    from lab.errors import LabError
    from lab.host.qemu_prefix import fetch
    from lab.vm.qemu.emulator import find_binary

    qemu = {"host": str(fetch(say=lambda _m: None))}
    try:
        qemu["virtual"] = str(find_binary("charge"))
    except LabError:
        qemu["virtual"] = qemu["host"]
    cells: dict[tuple[str, str], list[dict]] = {}
    with tempfile.TemporaryDirectory(prefix="numalab-clock-") as tmp:
        for load in ("quiet", "loaded"):
            hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)] \
                if load == "loaded" else []  # fmt: skip
            try:
                for i in range(repeats):
                    for clock in ("host", "virtual"):
                        r = one(Path(tmp) / f"{load}-{clock}-{i}", qemu[clock], clock, workload, duration, i)
                        cells.setdefault((clock, load), []).append(r or {})
                        print(f"  {clock:7} {load:6} {i + 1}/{repeats}: {r}", flush=True)
            finally:
                for h in hogs:
                    h.kill()
                    h.wait()
    virtual = "numalab's QEMU, --seed i" if qemu["virtual"] != qemu["host"] else "QEMU 10, --seed i"
    print(
        f"\n{workload} {duration} guest-s on ring-2 (2 vCPUs), TCG, {repeats} runs a cell; host clock: QEMU 10, "
        f"virtual clock: {virtual}:"
    )
    print(f"{'clock':8}{'host':8}{'GB/s median':>13}{'CoeffVar':>10}{'PTE upd/GB':>12}{'host s':>8}{'failed':>8}")
    for (clock, load), runs in cells.items():
        ok = [r for r in runs if r]
        g = [r["gbps"] for r in ok if r.get("gbps") is not None]
        p = [r["pte_per_gb"] for r in ok if r.get("pte_per_gb") is not None]
        h = [r["host_s"] for r in ok]
        print(f"{clock:8}{load:8}{(med(g) or 0):>13.4f}{cv(g):>10}{(med(p) or 0):>12.0f}{(med(h) or 0):>8.1f}"
              f"{len(runs) - len(ok):>8}")  # fmt: skip
    for clock in ("host", "virtual"):
        q = med([r["gbps"] for r in cells.get((clock, "quiet"), []) if r.get("gbps") is not None])
        lo = med([r["gbps"] for r in cells.get((clock, "loaded"), []) if r.get("gbps") is not None])
        if q and lo:
            print(f"{clock} clock: loaded/quiet GB/s median = {lo / q:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

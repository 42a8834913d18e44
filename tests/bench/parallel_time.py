"""What parallel guest time (--quantum) costs: host time per boot and per guest GB, against the shared clock.

    .venv/bin/python tests/bench/parallel_time.py [PAIRS] [QUANTUM_NS] [DURATION_S]   (defaults: 5, 2000, 5)

PAIRS interleaved pairs (shared, then parallel, then shared...) of numa01 on ring-2 with 1 vCPU a node, 256 MiB a
node, numalab's patched QEMU (make setup-qemu-charge), --clock virtual, the remote-latency model on, balancing on,
repeat i with --seed i on both sides. Prints per side the median and spread (min-max) of the boot's host seconds,
the workload's host seconds per guest GB written, and the guest-measured GB a guest second; then the ratios of the
medians (parallel / shared). Figures, not a test: run it on a quiet host, and say what else ran beside it.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's lab, whatever the venv's editable install points at
sys.path.insert(0, str(REPO / "tests" / "bench"))
from model_pairs import interleaved, summary  # noqa: E402

RUN = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--workload", "numa01", "--no-trace",
       "--qemu", "charge", "--clock", "virtual", "--remote-latency", "slit"]  # fmt: skip


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    quantum = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    duration = sys.argv[3] if len(sys.argv) > 3 else "5"
    sides = {f"quantum {q}": [*RUN, "--quantum", str(q)] for q in (0, quantum)}
    runs = interleaved(sides, pairs, duration)
    got = {q: runs[f"quantum {q}"] for q in (0, quantum)}
    print(f"numa01 on ring-2, {duration} guest s, seeds 0..{pairs - 1}; median (min-max) of each side's runs")
    print(f"{'side':<16} {'runs':>4}  {'boot host s':<24} {'host s a guest GB':<24} {'GB a guest s':<24}")
    for q, runs in got.items():
        cols = [summary([r[k] for r in runs if r[k] is not None]) for k in ("boot_s", "host_s_per_gb", "gbps")]
        name = "shared clock" if q == 0 else f"quantum {q} ns"
        print(f"{name:<16} {len(runs):>4}  {cols[0]:<24} {cols[1]:<24} {cols[2]:<24}")
    if got[0] and got[quantum]:
        for k in ("boot_s", "host_s_per_gb"):
            a = statistics.median(r[k] for r in got[quantum] if r[k] is not None)
            b = statistics.median(r[k] for r in got[0] if r[k] is not None)
            print(f"parallel / shared, {k}: {a / b:.2f}")
    return 0 if got[0] and got[quantum] else 1


if __name__ == "__main__":
    sys.exit(main())

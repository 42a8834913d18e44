"""What the remote-latency model's coherence costs: host time per boot and per guest GB, on against off.

    .venv/bin/python tests/bench/coherence.py [PAIRS] [DURATION_S]   (defaults: 3, 3)

PAIRS interleaved pairs (off, then on, then off...) of numa01 (its threads memset their memory: streams) on ring-2
with 1 vCPU a node, 256 MiB a node, numalab's patched QEMU (make setup-qemu-charge), --clock virtual --quantum 2000,
the remote-latency model on, balancing off, repeat i with --seed i on both sides. Prints per side the median and
spread (min-max) of the boot's host seconds, the workload's host seconds per guest GB written, the guest-measured
GB a guest second and the window's line transfers between nodes; then the ratios of the medians (on / off).
Figures, not a test: run it on a quiet host, and say what else ran beside it.
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
       "--qemu", "charge", "--clock", "virtual", "--quantum", "2000", "--remote-latency", "slit",
       "--numa-balancing", "off"]  # fmt: skip
KEYS = ("boot_s", "host_s_per_gb", "gbps", "transfers")


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    duration = sys.argv[2] if len(sys.argv) > 2 else "3"
    runs = interleaved({f"coherence {side}": [*RUN, "--coherence", side] for side in ("off", "on")}, pairs, duration)
    got = {side: runs[f"coherence {side}"] for side in ("off", "on")}
    print(f"numa01 on ring-2, {duration} guest s, quantum 2000, seeds 0..{pairs - 1}; median (min-max) of each side")
    print(f"{'coherence':<10} {'runs':>4}  " + " ".join(f"{k:<26}" for k in KEYS))
    for side, runs in got.items():
        cols = [summary([r[k] for r in runs if r[k] is not None]) for k in KEYS]
        print(f"{side:<10} {len(runs):>4}  " + " ".join(f"{c:<26}" for c in cols))
    if got["off"] and got["on"]:
        for k in ("boot_s", "host_s_per_gb", "gbps"):
            a = statistics.median(r[k] for r in got["on"] if r[k] is not None)
            b = statistics.median(r[k] for r in got["off"] if r[k] is not None)
            print(f"on / off, {k}: {a / b:.3f}")
    return 0 if got["off"] and got["on"] else 1


if __name__ == "__main__":
    sys.exit(main())

"""What the whole model costs against plain TCG: host time per boot and per guest GB (issue 52's cost goal: 2x).

    .venv/bin/python tests/bench/model_cost.py [PAIRS] [DURATION_S] [QEMU]   (defaults: 5, 5)

PAIRS interleaved pairs (plain, then model, then plain...) of numa01 on ring-2 with 1 vCPU a node, 256 MiB a node,
numalab's baseline kernel, balancing on. Plain: TCG as `numalab run` boots by default (the host's clock, every vCPU
its own host thread). The model: numalab's patched QEMU (make setup-qemu-charge) with the virtual clock, parallel
guest time (--quantum 2000), a CPU of 4 instructions a ns, the remote-latency model with streams and bandwidth
contention (--remote-latency slit), seed i on repeat i. Prints per side the median and spread (min-max) of the
boot's host seconds, the workload's host seconds per guest GB written and its vCPU threads' host CPU seconds per
guest GB (the manifest's vcpu_time: plain TCG's two vCPU threads on the 2 cores, the model's one round-robin
thread), the VM's host seconds (QEMU's start to its end: the boot, the init's stages, the workload and the results'
sending, the whole cost of a run in the VM), and the ratios of the medians (model / plain). QEMU, a binary's path,
adds a third side, the model on that binary (another build of numalab's series, to measure what a patch changed),
interleaved with the other two.
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

BASE = ["--kernel", "baseline", "--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M",
        "--workload", "numa01", "--no-trace"]  # fmt: skip
MODEL_CLOCK = ["--clock", "virtual", "--quantum", "2000", "--insns-per-ns", "4", "--remote-latency", "slit"]
MODEL = ["--qemu", "charge", *MODEL_CLOCK]
SIDES = {"plain TCG": BASE, "the model": [*BASE, *MODEL]}
KEYS = ("boot_s", "host_s_per_gb", "cpu_s_per_gb", "vm_s")


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    duration = sys.argv[2] if len(sys.argv) > 2 else "5"
    sides = dict(SIDES)
    if len(sys.argv) > 3:
        sides["other QEMU"] = [*BASE, *MODEL_CLOCK, "--qemu", sys.argv[3]]
    got = interleaved(sides, pairs, duration)
    print(f"numa01 on ring-2 (1 vCPU a node), {duration} s, seeds 0..{pairs - 1}; median (min-max) of each side's runs")
    heads = ("boot host s", "host s a guest GB", "vCPU CPU s a guest GB", "the VM's host s")
    print(f"{'side':<10} {'runs':>4}  " + " ".join(f"{h:<24}" for h in heads))
    for side, runs in got.items():
        cols = [summary([r[k] for r in runs if r[k] is not None]) for k in KEYS]
        print(f"{side:<10} {len(runs):>4}  " + " ".join(f"{c:<24}" for c in cols))
    plain, model = got["plain TCG"], got["the model"]
    for side in ("the model", "other QEMU"):
        if plain and got.get(side):
            for k in KEYS:
                if not all(any(r[k] is not None for r in rs) for rs in (got[side], plain)):
                    continue
                a = statistics.median(r[k] for r in got[side] if r[k] is not None)
                b = statistics.median(r[k] for r in plain if r[k] is not None)
                print(f"{side} / plain, {k}: {a / b:.2f}")
    return 0 if plain and model else 1


if __name__ == "__main__":
    sys.exit(main())

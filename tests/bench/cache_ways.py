"""What the modelled cache's ways cost (issue 67's cost, after the 8 ways of 2026-11-29): host time per guest GB.

    .venv/bin/python tests/bench/cache_ways.py [PAIRS] [DURATION_S] [WAYS...]   (defaults: 3, 5, then 1 and 8)

PAIRS interleaved rounds of model_cost.py's two sides (plain TCG and the whole model, coherence off) and the model
again at each other WAYS (--cache-ways), seed i in round i. Prints per side the median and spread of the boot's
host seconds, the workload's host seconds a guest GB, its vCPU threads' host CPU seconds a guest GB and the VM's
host seconds, the guest-measured GB a guest second, and each ratio to plain TCG and to the model at 8 ways.
Figures, not a test: run it on a quiet host, and say what else ran beside it.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "bench"))
from model_cost import BASE, KEYS, MODEL  # noqa: E402
from model_pairs import interleaved, summary  # noqa: E402


def main() -> int:
    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    duration = sys.argv[2] if len(sys.argv) > 2 else "5"
    ways = [int(w) for w in sys.argv[3:]] or [1, 8]
    sides = {"plain TCG": BASE} | {f"{w} ways": [*BASE, *MODEL, "--cache-ways", str(w)] for w in ways}
    got = interleaved(sides, pairs, duration)
    print(f"numa01 on ring-2 (1 vCPU a node), {duration} s, seeds 0..{pairs - 1}; median (min-max) of each side's runs")
    heads = ("boot host s", "host s a guest GB", "vCPU CPU s a guest GB", "the VM's host s", "guest GB/s")
    print(f"{'side':<10} {'runs':>4}  " + " ".join(f"{h:<24}" for h in heads))
    for side, runs in got.items():
        cols = [summary([r[k] for r in runs if r[k] is not None]) for k in (*KEYS, "gbps")]
        print(f"{side:<10} {len(runs):>4}  " + " ".join(f"{c:<24}" for c in cols))

    def median(side: str, key: str) -> float | None:
        values = [r[key] for r in got.get(side, []) if r[key] is not None]
        return statistics.median(values) if values else None

    for side in [s for s in sides if s != "plain TCG"]:
        for ref in ("plain TCG", "8 ways"):
            if side == ref or ref not in sides:
                continue
            for k in ("host_s_per_gb", "cpu_s_per_gb"):
                a, b = median(side, k), median(ref, k)
                if a and b:
                    print(f"{side} / {ref}, {k}: {a / b:.2f}")
    return 0 if all(got.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

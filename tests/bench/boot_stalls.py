"""How often does multi-threaded TCG stall an 8-vCPU boot? A long boot loop per QEMU version.

    .venv/bin/python tests/bench/boot_stalls.py [BOOTS_PER_VERSION]      (default 40)

Each boot is an idle numalab run of seed000-4node (8 vCPUs, the stock kernel, TCG), alternating QEMU 7.2
(the system's) and QEMU 10 (make setup-qemu10). A stall is a boot attempt that numalab stopped at its boot
deadline (the manifest's stalled_boots; numalab boots once more). Prints, per version, stalls / boot attempts
with a 95% Wilson interval: with a rate near 1 in 100, a few hundred boots are needed to tell two versions
apart. Figures, not a test.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's lab, whatever the venv's editable install points at


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def main() -> int:
    boots = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    from lab.host.qemu_prefix import fetch

    sides = {"7.2": "system", "10.0": str(fetch(say=lambda _m: None))}
    stalls = {n: 0 for n in sides}
    attempts = {n: 0 for n in sides}
    other = {n: 0 for n in sides}
    with tempfile.TemporaryDirectory(prefix="numalab-stalls-") as tmp:
        for i in range(boots):
            for name, qemu in sides.items():
                out = Path(tmp) / f"{name}-{i}"
                proc = subprocess.run(
                    [sys.executable, "-m", "lab.cli", "run", "--qemu", qemu, "--topology", "seed000-4node",
                     "--accel", "tcg", "--workload", "idle", "--duration", "0.1", "--no-trace", "--out", str(out),
                     "--json"], capture_output=True, text=True, cwd=REPO, timeout=900,
                )  # fmt: skip
                try:
                    m = json.loads(proc.stdout)
                except json.JSONDecodeError:
                    other[name] += 1
                    continue
                stalled = len(m.get("stalled_boots") or [])
                stalls[name] += stalled
                attempts[name] += 1 + stalled
                if m.get("status") != "ok":
                    other[name] += 1
                print(f"  boot {i + 1}/{boots} QEMU {name}: {m.get('status')}, {stalled} stalled", flush=True)
    print("\nstalled boot attempts (seed000-4node, 8 vCPUs, TCG):")
    for name in sides:
        lo, hi = wilson(stalls[name], attempts[name])
        rate = 100 * stalls[name] / max(1, attempts[name])
        print(f"QEMU {name:<5} {stalls[name]}/{attempts[name]} attempts = {rate:.2f}%"
              f"  (95% CI {100 * lo:.2f}-{100 * hi:.2f}%)  runs not ok: {other[name]}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

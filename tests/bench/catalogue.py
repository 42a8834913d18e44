#!/usr/bin/env python3
"""What each built-in workload's host tools add to the guest image, and what that costs a boot.

    .venv/bin/python tests/bench/catalogue.py [--topology ring-2] [--repeats 2] [--no-boot]

For every tool set of the built-in catalogue (none, hackbench, perf, stress-ng, sysbench, cyclictest),
prints the size of its layers (the tool and its shared-library closure, cached archives laid over the
base image: lab.workloads.image_layers.tool_layer) and, unless --no-boot, the mean host seconds to boot
(``timings.boot_s``: QEMU start to the guest's init) over ``--repeats`` runs of a workload that carries
it, beside ``idle`` (no tool). Prints figures; not a pass/fail test: on a shared TCG host a boot's time
moves by more than a small layer costs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lab.workloads.image_layers import tool_layer  # noqa: E402
from lab.workloads.registry import WORKLOADS  # noqa: E402

# One workload for each tool set (the first in the catalogue that carries it), idle for none.
BY_TOOLS = {(): "idle"}
for _w in WORKLOADS.values():
    BY_TOOLS.setdefault(_w.tools, _w.name)


def boot_seconds(workload: str, topology: str, repeats: int) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "lab.cli", "run", "--topology", topology, "--workload", workload,
               "--duration", "1", "--repeat", str(repeats), "--no-trace", "--out", f"{tmp}/runs"]  # fmt: skip
        subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False,
                       timeout=600 * repeats)  # fmt: skip
        found = [json.loads(p.read_text()) for p in Path(tmp).glob("**/manifest.json")]
    return [m["timings"]["boot_s"] for m in found if (m.get("timings") or {}).get("boot_s") is not None]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="ring-2")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--no-boot", action="store_true", help="layer sizes only")
    args = ap.parse_args()
    print(f"{'tools':<24} {'workload':<22} {'layer MB':>9} {'boot s (mean)':>14} {'boots':>6}")
    base = None
    for tools, workload in BY_TOOLS.items():
        mb = sum(tool_layer(t).stat().st_size for t in tools) / 1e6
        boots = [] if args.no_boot else boot_seconds(workload, args.topology, args.repeats)
        mean = statistics.mean(boots) if boots else None
        base = mean if not tools else base
        extra = f" ({mean - base:+.2f})" if mean is not None and base is not None and tools else ""
        shown = f"{mean:.2f}{extra}" if mean is not None else "-"
        print(f"{'+'.join(tools) or '(none)':<24} {workload:<22} {mb:>9.1f} {shown:>14} {len(boots):>6}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

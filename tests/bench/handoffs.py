"""Issue 66's K4, hand-offs, as figures: what a round trip between two pinned processes costs in guest time on one
node and across two, and what the coherence model charged it, at several quanta.

    .venv/bin/python tests/bench/handoffs.py [--qemu PATH] [QUANTA_NS...]   (default: 500 2000 8000)

``handoff`` (tests/handoff.py) on ring-2 (CPUs 0-1 node 0, 2-3 node 1) under --model m1 --coherence on, balancing
off, 1 guest s a run: over two pipes (each side sleeps until the other wakes it) between CPUs 0 and 1 and between 0
and 2, and through a shared counter (each side spins), at each quantum. Prints each run's round-trip time (guest
ns), the line transfers charged a round trip and their time, and per quantum the cross-node minus the same-node round
trip over the cross-node transfers' time: 1.0 where a hand-off costs its transfers (docs/throughput.md, K4).
Figures, not a test: guest-time figures do not depend on the host's load; the host seconds do. ``--qemu PATH``
runs a QEMU of one's own build (a patch to the series under trial) in place of numalab's patched one.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # this checkout's lab, whatever the venv's editable install points at
sys.path.insert(0, str(REPO / "tests"))
from handoff import handoff_run  # noqa: E402


def run(work: Path, mode: str, cpus: tuple[int, int], quantum: int, qemu: list[str]) -> dict:
    proc, fig = handoff_run(work, mode, cpus, quantum, *qemu)
    if fig is None or fig["status"] != "ok":
        why = proc.stderr.strip().splitlines()[-1:] if fig is None else fig["reason"]
        sys.exit(f"handoffs: {mode} {cpus} at {quantum} ns failed: {why}")
    return fig


def main() -> int:
    args = sys.argv[1:]
    qemu = args[:2] if args[:1] == ["--qemu"] else []
    quanta = [int(q) for q in args[len(qemu) :]] or [500, 2000, 8000]
    print(f"{'mode':8} {'cpus':5} {'quantum':>8} {'rtt ns':>9} {'transfers/rt':>13} {'their ns':>9} {'host s':>7}")
    with tempfile.TemporaryDirectory(prefix="numalab-handoffs-") as tmp:
        work = Path(tmp)
        grid = [(mode, q) for mode in ("pipe", "counter") for q in quanta]
        for mode, q in grid:
            same, cross = run(work, mode, (0, 1), q, qemu), run(work, mode, (0, 2), q, qemu)
            for cpus, r in (("0,1", same), ("0,2", cross)):
                print(f"{mode:8} {cpus:5} {q:>8} {r['rtt_ns']:>9.1f} {r['transfers']:>13.1f} {r['transfer_ns']:>9.0f} "
                      f"{r['host_s']:>7.1f}")  # fmt: skip
            ratio = (cross["rtt_ns"] - same["rtt_ns"]) / cross["transfer_ns"] if cross["transfer_ns"] else float("nan")
            print(f"  {mode} at {q} ns: (cross - same) / cross transfers' time = {ratio:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

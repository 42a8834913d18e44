#!/usr/bin/env python3
"""Host noise under TCG: a throughput metric against its per-vCPU-second twin over identical repeats.

    .venv/bin/python tests/bench/vcpu_noise.py [--topology ring-2] [--workload numa02] [--duration 8]
                                               [--repeats 5] [--out DIR]

Runs the same VM ``--repeats`` times on the host as it is ("quiet"), then again with a CPU hog on every
host core (a busy loop per core, started here and stopped by its pid), and prints, per phase and for
both phases pooled, the CoeffVar (sample σ / mean) of the raw metric (GB/s, or round trips/s for pairs)
and of its twin (work per vCPU CPU-second: lab.analysis.metrics.per_vcpu_second), with the vCPU
threads' share of the CPU they wanted (run / (run + wait)). Prints figures; not a pass/fail test: on a
shared host other VMs are part of "quiet".

numa02 by default: its threads write 32 MiB each, so nearly all of its work is steady-state writes. numa01
writes a shared area of a third of guest memory, first touching every page; a run that gets little CPU spends
most of its window in those page faults, whose cost per byte is far higher, and its work per vCPU-second
falls with the CPU it gets (measured: the twin moved 0.43x under the hog against the raw 0.24x).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from lab.analysis.metrics import METRIC_KEYS, TWINS, metric_values  # noqa: E402


def runs(out: Path, args: argparse.Namespace) -> list[dict]:
    """``numalab run --repeat N`` into ``out``; every repeat's manifest (failed ones too: they are counted)."""
    cmd = [sys.executable, "-m", "lab.cli", "run", "--topology", args.topology, "--workload", args.workload,
           "--duration", f"{args.duration:g}", "--repeat", str(args.repeats), "--no-trace",
           "--out", str(out)]  # fmt: skip
    subprocess.run(cmd, cwd=REPO, stdout=subprocess.DEVNULL, check=False, timeout=args.repeats * 600)
    return [json.loads(p.read_text()) for p in sorted(out.glob("r*/manifest.json"))]


def hogs() -> list[subprocess.Popen]:
    """One busy loop per host core."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 1)]


def cv(values: list[float]) -> str:
    if len(values) < 2 or not statistics.mean(values):
        return "-"
    return f"{statistics.stdev(values) * 100 / statistics.mean(values):.1f}%"


def figures(manifests: list[dict], raw: str, twin: str) -> dict:
    ok = [m for m in manifests if m.get("status") == "ok"]
    vals = [metric_values(m) for m in ok]
    vt = [m.get("vcpu_time") or {} for m in ok]
    share = [v["run_s"] / (v["run_s"] + v["wait_s"]) for v in vt if v.get("wait_s") is not None and v.get("run_s")]
    return {
        "runs": f"{len(ok)}/{len(manifests)}",
        "raw": [v[raw] for v in vals if raw in v],
        "twin": [v[twin] for v in vals if twin in v],
        "share": share,
    }


def row(name: str, f: dict) -> str:
    mean = lambda xs: f"{statistics.mean(xs):.4g}" if xs else "-"  # noqa: E731
    return (f"{name:<12} {f['runs']:>5}  {mean(f['raw']):>10} {cv(f['raw']):>8}  {mean(f['twin']):>10} "
            f"{cv(f['twin']):>8}  {mean(f['share']):>6}")  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="ring-2")
    ap.add_argument("--workload", default="numa02")
    ap.add_argument("--duration", type=float, default=8.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="bench-vcpu-noise-"))
    twin = next((t for t in TWINS if t.rate == "round_trips_per_s"), TWINS[0]) if args.workload == "pairs" else TWINS[0]
    raw_key, twin_key = f"workload.{twin.rate}", f"workload.{twin.key}"
    print(
        f"host: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start; {args.repeats} x "
        f"{args.topology} {args.workload} {args.duration:g}s, quiet then under {os.cpu_count()} busy loops -> {out}"
    )
    t0 = time.monotonic()
    quiet = runs(out / "quiet", args)
    hog = hogs()
    try:
        loaded = runs(out / "hog", args)
    finally:
        for p in hog:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    fq, fh = figures(quiet, raw_key, twin_key), figures(loaded, raw_key, twin_key)
    pooled = {k: (fq[k] + fh[k]) if k != "runs" else f"{len(fq['raw']) + len(fh['raw'])}" for k in fq}
    unit = METRIC_KEYS[raw_key].unit
    print(
        f"\n{'phase':<12} {'ok':>5}  {raw_key.split('.')[1]:>10} {'CoeffVar':>8}  {twin.key:>10} {'CoeffVar':>8}"
        f"  {'run/(run+wait)':>6}\n{'':<12} {'':>5}  {unit:>10} {'':>8}  {METRIC_KEYS[twin_key].unit:>10}"
    )
    for name, f in (("quiet", fq), ("cpu hog", fh), ("both", pooled)):
        print(row(name, f))
    for what in ("raw", "twin"):
        if fq[what] and fh[what]:
            ratio = statistics.median(fh[what]) / statistics.median(fq[what])
            print(f"median under the hog / quiet, {what}: {ratio:.2f}")
    print(f"wall {time.monotonic() - t0:.0f}s; records in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

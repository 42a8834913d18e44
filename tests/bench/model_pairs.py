"""What the model benches share (tests/bench/parallel_time.py, tests/bench/coherence.py, tests/bench/model_cost.py):
one seeded run through the CLI, reduced to the figures they compare, interleaved pairs of such runs, and a median
with its spread. Not a bench of its own."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def one(out: Path, args: list[str], duration: str, seed: int, label: str) -> dict | None:
    """``numalab run ARGS --duration --seed`` (no seed under the host's clock) into ``out``: its boot's host
    seconds, the VM's (QEMU's start to its end), the workload's host seconds a guest GB written, its vCPU threads'
    host CPU seconds a guest GB, the guest-measured GB a guest second and the window's line transfers; None (said on
    stdout, with ``label``) for a run without an ok record."""
    seeded = ["--seed", str(seed)] if "virtual" in args else []  # (the host's clock takes no seed: no run repeats)
    cmd = [sys.executable, "-m", "lab.cli", "run", *args, "--duration", duration, *seeded,
           "--out", str(out), "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=3600)
    try:
        m = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(f"  {label} seed {seed}: no record ({proc.stderr.strip()[-200:]})", flush=True)
        return None
    if m.get("status") != "ok":
        print(f"  {label} seed {seed}: {m.get('status')} ({m.get('reason')})", flush=True)
        return None
    r, t = m["workload"]["result"], m["timings"]
    gb = (r.get("bytes_touched") or 0) / 1e9
    window = (m.get("remote_latency") or {}).get("window", {})
    cpu = (m.get("vcpu_time") or {}).get("run_s")  # the vCPU threads' host CPU over the workload (one rr thread once)
    return {"boot_s": t["boot_s"], "vm_s": t["vm_s"], "host_s_per_gb": t["workload_host_s"] / gb if gb else None,
            "gbps": r.get("gbps"),
            "cpu_s_per_gb": cpu / gb if gb and cpu else None, "transfers": window.get("transfers")}  # fmt: skip


def summary(values: list[float]) -> str:
    """The median and the spread: ``M (MIN-MAX)``, or ``-`` for none."""
    if not values:
        return "-"
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def interleaved(sides: dict[str, list[str]], pairs: int, duration: str) -> dict[str, list[dict]]:
    """``pairs`` rounds of one run of each side in turn (``numalab run`` arguments by side), repeat i with seed i:
    the host's load falls on every side alike. Each side's ok runs' figures (``one``), each said as it comes."""
    got: dict[str, list[dict]] = {side: [] for side in sides}
    with tempfile.TemporaryDirectory(prefix="numalab-bench-") as tmp:
        for i in range(pairs):
            for k, (side, args) in enumerate(sides.items()):
                res = one(Path(tmp) / f"{k}-{i}", args, duration, i, side)
                if res:
                    got[side].append(res)
                    print(f"  pair {i + 1}/{pairs}, {side}: {res}", flush=True)
    return got

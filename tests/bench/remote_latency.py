"""What --remote-latency slit costs: numa01 on ring-2, plain TCG against the remote-latency plugin.

    .venv/bin/python tests/bench/remote_latency.py [REPEATS] [DURATION_S]   (defaults: 2, 6)

REPEATS runs of each (plain, slit), interleaved, of numa01 on ring-2 (1 vCPU a node, 256 MiB a node, TCG,
the stock kernel, NUMA balancing on, no trace). Prints per configuration the median host seconds a run
took, the guest-measured GB/s, GB per vCPU CPU-second (lab.analysis.metrics' twin, which host load moves
less), and for slit the time charged and held over the workload and the share of modelled misses that were
remote. The slowdown of slit is the plugin's callback on every access plus the time charged (the model at
work: that part is wanted). Figures, not a test.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--accel", "tcg",
        "--workload", "numa01", "--no-trace", "--numa-balancing", "on"]  # fmt: skip
CONFIGS = {"plain": [], "slit": ["--remote-latency", "slit"]}


def one(out: Path, extra: list[str], duration: str) -> dict | None:
    argv = [sys.executable, "-m", "lab.cli", "run", *ARGS, *extra, "--duration", duration, "--out", str(out), "--json"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=REPO, timeout=900)
    try:
        m = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return None
    if m.get("status") != "ok":
        return None
    r = m["workload"]["result"]
    w = (m.get("remote_latency") or {}).get("window") or {}
    return {
        "host_s": m["timings"]["total_s"],
        "gbps": r.get("gbps"),
        "gb_per_vcpu_s": (m["metrics"].get("per_vcpu_s") or {}).get("gbps_per_vcpu_s"),
        "charged_s": w.get("charged_s"),
        "held_s": w.get("held_s"),
        "remote_pct": w.get("remote_miss_pct"),
    }


def med(values: list) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(v: float | None, spec: str = ".3f") -> str:
    return "-" if v is None else format(v, spec)


def main() -> int:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    duration = sys.argv[2] if len(sys.argv) > 2 else "6"
    results: dict[str, list[dict]] = {c: [] for c in CONFIGS}
    with tempfile.TemporaryDirectory(prefix="bench-remote-latency-") as tmp:
        for i in range(repeats):
            for name, extra in CONFIGS.items():
                r = one(Path(tmp) / f"{name}-{i}", extra, duration)
                if r is not None:
                    results[name].append(r)
    print(f"numa01 on ring-2 (2 vCPUs, TCG), {duration} s, medians of {repeats} runs; host cores: 2, shared")
    print(f"{'':7}{'ok':>3}{'host s':>8}{'GB/s':>8}{'x':>7}{'GB/vCPU-s':>11}{'x':>7}{'charged s':>11}{'held s':>8}"
          f"{'remote %':>10}")  # fmt: skip
    base = {k: med([r[k] for r in results["plain"]]) for k in ("gbps", "gb_per_vcpu_s")}
    for name, rs in results.items():
        m = {k: med([r[k] for r in rs]) for k in ("host_s", "gbps", "gb_per_vcpu_s", "charged_s", "held_s",
                                                  "remote_pct")}  # fmt: skip
        slow = {k: base[k] / m[k] if base[k] and m[k] else None for k in base}
        print(f"{name:7}{len(rs):>3}{fmt(m['host_s'], '.1f'):>8}{fmt(m['gbps']):>8}{fmt(slow['gbps'], '.2f'):>7}"
              f"{fmt(m['gb_per_vcpu_s']):>11}{fmt(slow['gb_per_vcpu_s'], '.2f'):>7}{fmt(m['charged_s'], '.2f'):>11}"
              f"{fmt(m['held_s'], '.2f'):>8}{fmt(m['remote_pct'], '.1f'):>10}")  # fmt: skip
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""What --remote-latency slit costs: numa01 on ring-2, plain TCG against the remote-latency plugin.

    .venv/bin/python tests/bench/remote_latency.py [REPEATS] [DURATION_S] [QEMU] [--only plain,charged,...]
    (defaults: 2, 6, every configuration)

REPEATS runs of each (plain, slit, and with numalab's patched QEMU built: plain10, QEMU 10 (backports) on the host's
clock; virtual, --clock virtual alone; charged0, --clock virtual --remote-latency slit with nothing to charge
(L=0.001 ns, no stream pricing): the instrumentation alone; charged, --clock virtual --remote-latency slit;
charged-par, the same with --quantum 2000: each vCPU its own guest time), interleaved, of numa01 on ring-2 (1 vCPU a
node, 256 MiB a node, TCG, the stock kernel, NUMA balancing on, no trace). Prints per configuration the median host
seconds a run took, the guest-measured GB/s, GB per vCPU CPU-second (lab.analysis.metrics' twin, which host load
moves less), GB per host second of the workload (the emulation's speed: what the virtual clock runs cost in host
time), and for slit and charged the time charged and held over the workload and the share of modelled misses that
were remote. The slowdown of slit is the plugin's callback on every access plus the time charged (the model at work:
that part is wanted); that of charged against plain, by GB per host second, is what issue 26 asks to keep within 3x
(issue 39: 4x). "boot s" is the host seconds to a booted guest (issue 39: a boot under the charge within 2x of plain
TCG's).

QEMU, a path, adds a row "charged-q" with that binary instead of the patched QEMU that `--qemu charge` runs:
an earlier build of numalab's series (the cache's other qemu-charge/*/usr/bin/qemu-system-x86_64), to measure
what a patch changed. Without images/qemu/0005 the plugin is called on every access instead of on each change
of line. Figures, not a test.
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
ARGS = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--accel", "tcg",
        "--workload", "numa01", "--no-trace", "--numa-balancing", "on"]  # fmt: skip
CONFIGS = {"plain": [], "slit": ["--remote-latency", "slit"]}
CHARGED = {"plain10": ["--qemu", "backports"],
           "virtual": ["--qemu", "charge", "--clock", "virtual"],
           "charged0": ["--qemu", "charge", "--clock", "virtual", "--remote-latency", "slit",
                        "--remote-latency-ns", "0.001", "--remote-bandwidth-gbs", "0"],
           "charged": ["--qemu", "charge", "--clock", "virtual", "--remote-latency", "slit"],
           # the fuller model of issue 52: each vCPU its own guest time (a 2 us quantum), the rest as charged
           "charged-par": ["--qemu", "charge", "--clock", "virtual", "--remote-latency", "slit",
                           "--quantum", "2000"]}  # fmt: skip


def have_charge_qemu() -> bool:
    sys.path.insert(0, str(REPO))
    from lab.errors import LabError
    from lab.vm.qemu.emulator import find_binary

    try:
        find_binary("charge")
    except LabError:
        return False
    return True


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
    stage = {st["name"]: st["host_s"] for st in m.get("stages", [])}
    # the workload's host seconds (timings.workload_s is the guest's under --clock virtual)
    host = stage["workload-end"] - stage["workload-start"] if {"workload-start", "workload-end"} <= set(stage) else None
    return {
        "host_s": m["timings"]["total_s"],
        "boot_s": m["timings"].get("boot_s"),
        "gbps": r.get("gbps"),
        "gb_per_host_s": r["bytes_touched"] / 1e9 / host if r.get("bytes_touched") and host else None,
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


def spread(values: list, spec: str) -> str:
    values = [v for v in values if v is not None]
    return f"{min(values):{spec}}-{max(values):{spec}}" if values else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("repeats", nargs="?", type=int, default=2)
    ap.add_argument("duration", nargs="?", default="6")
    ap.add_argument("qemu", nargs="?", help="an earlier patched QEMU's binary: the charged-q row")
    ap.add_argument("--only", help="these configurations alone, comma-separated (plain is always run: the base)")
    args = ap.parse_args()
    repeats, duration = args.repeats, args.duration
    configs = CONFIGS | (CHARGED if have_charge_qemu() else {})
    if args.qemu:
        configs["charged-q"] = ["--qemu", args.qemu, *CHARGED["charged"][2:]]
    if args.only:
        wanted = {"plain", *args.only.split(",")}
        if unknown := wanted - set(configs):
            ap.error(f"--only: no configuration {', '.join(sorted(unknown))} (there are {', '.join(configs)})")
        configs = {k: v for k, v in configs.items() if k in wanted}
    if len(configs) == len(CONFIGS):
        print("(no patched QEMU: make setup-qemu-charge for the virtual and charged rows)")
    results: dict[str, list[dict]] = {c: [] for c in configs}
    with tempfile.TemporaryDirectory(prefix="bench-remote-latency-") as tmp:
        for i in range(repeats):
            for name, extra in configs.items():
                r = one(Path(tmp) / f"{name}-{i}", extra, duration)
                if r is not None:
                    results[name].append(r)
    print(f"numa01 on ring-2 (2 vCPUs, TCG), {duration} s, medians of {repeats} runs; host cores: 2, shared")
    print(f"{'':10}{'ok':>3}{'host s':>8}{'boot s':>8}{'GB/s':>8}{'x':>7}{'GB/vCPU-s':>11}{'x':>7}"
          f"{'GB/host-s':>11}{'x':>7}{'charged s':>11}{'held s':>8}{'remote %':>10}")  # fmt: skip
    base = {k: med([r[k] for r in results["plain"]]) for k in ("gbps", "gb_per_vcpu_s", "gb_per_host_s")}
    for name, rs in results.items():
        m = {k: med([r[k] for r in rs]) for k in ("host_s", "boot_s", "gbps", "gb_per_vcpu_s", "gb_per_host_s",
                                                  "charged_s", "held_s", "remote_pct")}  # fmt: skip
        slow = {k: base[k] / m[k] if base[k] and m[k] else None for k in base}
        print(f"{name:10}{len(rs):>3}{fmt(m['host_s'], '.1f'):>8}{fmt(m['boot_s'], '.1f'):>8}{fmt(m['gbps']):>8}"
              f"{fmt(slow['gbps'], '.2f'):>7}"
              f"{fmt(m['gb_per_vcpu_s']):>11}{fmt(slow['gb_per_vcpu_s'], '.2f'):>7}{fmt(m['gb_per_host_s']):>11}"
              f"{fmt(slow['gb_per_host_s'], '.2f'):>7}{fmt(m['charged_s'], '.2f'):>11}{fmt(m['held_s'], '.2f'):>8}"
              f"{fmt(m['remote_pct'], '.1f'):>10}")  # fmt: skip
    print("spread (min-max) of each configuration's runs: boot s, GB/host-s, GB/vCPU-s")
    for name, rs in results.items():
        boot, host, vcpu = ([r[k] for r in rs] for k in ("boot_s", "gb_per_host_s", "gb_per_vcpu_s"))
        print(f"{name:10}{spread(boot, '.1f'):>14}{spread(host, '.3f'):>14}{spread(vcpu, '.3f'):>14}")
    print(
        "x: plain's figure over this one (a slowdown). Under --clock virtual GB/s is per guest second (it counts the "
        "charge); GB/host-s is the emulation's speed."
    )
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())

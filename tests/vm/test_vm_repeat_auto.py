"""numalab run --repeat auto on real VMs: pairs until the verdict decides or the budget is spent."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from common import numalab

from lab.errors import LabError

pytestmark = [pytest.mark.vm, pytest.mark.alone]  # (boot times decide; the baseline is built by then)


def _baseline_built() -> bool:
    from lab.kernel.resolve import resolve_kernel

    try:
        resolve_kernel("baseline")
    except LabError:
        return False
    return True


def test_repeat_auto_stops_at_the_budget_and_decides_a_clear_difference(tmp_path: Path) -> None:
    """stock (modular Debian kernel) against the trimmed baseline, idle 0.5 s on ring-2 with 1 vCPU a node.

    vmstat.numa_pages_migrated is 0 on both sides (idle): never significant, and since issue 71 the same (every
    run 0: no spread, no difference), which decides as boot_s does; a run that migrated a page would leave it
    undecided, and the loop would run to --max-pairs 3 and say so. timings.boot_s differs by a lot between the
    two kernels (the stock one loads modules): significant after the first look. The verdict lines are checked
    against the manifests' own figures.
    """
    if not _baseline_built():
        pytest.skip("needs the trimmed baseline kernel (numalab kernel build)")
    out = tmp_path / "ab"
    proc = numalab(
        "run", "--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--workload", "idle",
        "--duration", "0.5", "--kernel", "stock", "--kernel", "baseline", "--repeat", "auto", "--max-pairs", "3",
        "--decide", "vmstat.numa_pages_migrated", "--decide", "timings.boot_s", "--out", str(out), "--json",
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    v = json.loads(proc.stdout)
    by = {x["metric"]: x for x in v["verdicts"]}
    migrated = by["vmstat.numa_pages_migrated"]
    if migrated["mean_base"] == migrated["mean_new"] == 0:  # (no page in any run: the same, decided)
        assert migrated["direction"] == "same" and migrated["equivalent"] is True
    else:  # (not significant is undecided, never "same": issue 71)
        assert migrated["direction"] in ("undecided", "changed")
    assert v["pairs"] == 3 and v["stopped"] == ("decided" if migrated["decided"] else "max-repeats"), v["detail"]
    assert "vmstat.numa_pages_migrated" in v["detail"]
    boot = by["timings.boot_s"]
    manifests = {k: [json.loads((out / f"{k}-r{i}" / "manifest.json").read_text()) for i in (1, 2, 3)]
                 for k in ("stock", "baseline")}  # fmt: skip
    means = {k: statistics.mean(m["timings"]["boot_s"] for m in ms) for k, ms in manifests.items()}
    assert boot["mean_base"] == pytest.approx(means["stock"]) and boot["mean_new"] == pytest.approx(means["baseline"])
    assert boot["significant"] is True and boot["direction"] == ("better" if means["baseline"] < means["stock"]
                                                                 else "worse")  # fmt: skip
    assert all(m["accelerator"]["name"] == boot["accelerator"] for ms in manifests.values() for m in ms)
    # the paste-able lines, on the human output, and the A/B report
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("verdict: timings.boot_s")]
    assert lines and "baseline vs stock" in lines[-1] and "3+3 runs" in lines[-1]
    assert (out / "verdict.json").exists() and (out / "report.html").exists()


def test_matrix_repeats_auto_adds_pairs_only_until_decided(tmp_path: Path) -> None:
    """numalab matrix run with repeats: auto on real VMs: stock vs baseline, idle; boot time decides after the
    minimum of 3 pairs (no 4th is started), and the verdict is printed and in auto.json."""
    if not _baseline_built():
        pytest.skip("needs the trimmed baseline kernel (numalab kernel build)")
    spec = tmp_path / "auto.yaml"
    spec.write_text(
        "name: auto-idle\n"
        "topologies: [{name: ring-2, cpus_per_node: 1, mem_per_node: 256M}]\n"
        "kernels: [stock, baseline]\n"
        "workloads: [{name: idle, duration: 0.5}]\n"
        "repeats: auto\n"
        "auto: {min: 3, max: 4, decide: [timings.boot_s]}\n"
    )
    out = tmp_path / "m"
    proc = numalab("matrix", "run", str(spec), "--out", str(out), "--no-reports", "--max-vms", "1", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (cell,) = json.loads((out / "auto.json").read_text())["cells"]
    assert cell["stopped"] == "decided" and cell["repeats"] == 3, cell
    assert sorted(p.name for p in (out / "runs").iterdir()) == sorted(
        f"ring-2-c1-m256M.{k}.idle.default.r{i}" for k in ("stock", "baseline") for i in (1, 2, 3)
    )
    assert "verdict: timings.boot_s: baseline vs stock: better" in proc.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"]["runs"] == 6

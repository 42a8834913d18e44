"""Issue 26 stage 1 on a real VM (direct QEMU): the manifest's vcpu_time (the vCPU threads' schedstat over the
workload window) is there and plausible, and the per-vCPU-second twin is the workload's work divided by it;
compare shows both metrics. (The libvirt backend's: tests/libvirt/test_libvirt_backend.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from common import numalab

pytestmark = pytest.mark.vm


def check_vcpu_time(m: dict, source: str) -> dict:
    """The checks both backends' runs must pass; returns vcpu_time."""
    vt = m["vcpu_time"]
    n = m["topology"]["total_cpus"]
    assert vt["source"] == source and "problem" not in vt, vt
    assert vt["n_vcpus"] == n == len(vt["vcpus"]) and [v["vcpu"] for v in vt["vcpus"]] == list(range(n))
    # the window is the workload's, give or take the console watcher's poll at each end
    assert abs(vt["window_s"] - m["timings"]["workload_s"]) < 2.0, (vt["window_s"], m["timings"])
    assert 0 < vt["run_s"] <= n * vt["window_s"] * 1.05, vt
    assert vt["run_s"] == pytest.approx(sum(v["run_s"] for v in vt["vcpus"]), abs=1e-5)
    assert all(v["run_s"] >= 0 for v in vt["vcpus"])
    assert vt["wait_s"] is not None and vt["wait_s"] >= 0 and all(v["wait_s"] >= 0 for v in vt["vcpus"])
    result = m["workload"]["result"]
    twin = m["metrics"]["per_vcpu_s"]["gbps_per_vcpu_s"]
    assert twin == pytest.approx(result["bytes_touched"] / 1e9 / vt["run_s"], rel=1e-9)
    assert twin > 0 and result["gbps"] > 0
    return vt


def test_vcpu_time_and_the_twin_on_a_real_vm(tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = numalab("run", "--topology", "ring-2", "--workload", "numa01", "--duration", "6", "--no-trace",
                   "--out", str(out), timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "ok", m["reason"]
    vt = check_vcpu_time(m, "schedstat")
    assert all(v["slices"] > 0 for v in vt["vcpus"])  # every vCPU ran (the workload has a thread per vCPU)
    assert f"vCPU time {vt['run_s']:.2f}s" in proc.stdout and "gbps_per_vcpu_s=" in proc.stdout
    again = tmp_path / "again"  # (compare refuses one run on both sides: a copy under another run id)
    shutil.copytree(out, again)
    (again / "manifest.json").write_text(json.dumps(m | {"run_id": m["run_id"] + "-again"}))
    cmp = numalab("compare", "--baseline", str(out), "--new", str(again), "--json", timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    rows = {r["metric"]: r for r in json.loads(cmp.stdout)["metrics"]}
    assert rows["workload.gbps"]["mean"] == rows["workload.gbps_per_vcpu_s"]["mean"] == "Hmean"
    twin = rows["workload.gbps_per_vcpu_s"]["baseline_mean"]
    assert twin == pytest.approx(m["metrics"]["per_vcpu_s"]["gbps_per_vcpu_s"])


def test_the_round_trip_twin_and_the_report_on_a_real_vm(tmp_path: Path) -> None:
    """pairs' round trips per vCPU-second, and the report's table and facts with both metrics."""
    out = tmp_path / "pairs"
    proc = numalab("run", "--topology", "ring-2", "--cpus-per-node", "1", "--workload", "pairs", "--duration", "5",
                   "--no-trace", "--out", str(out), timeout=400)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    m = json.loads((out / "manifest.json").read_text())
    assert m["status"] == "ok", m["reason"]
    vt = m["vcpu_time"]
    assert vt["source"] == "schedstat" and 0 < vt["run_s"] <= vt["n_vcpus"] * vt["window_s"] * 1.05, vt
    twin = m["metrics"]["per_vcpu_s"]["round_trips_per_vcpu_s"]
    assert twin == pytest.approx(m["workload"]["result"]["round_trips"] / vt["run_s"], rel=1e-9) and twin > 0
    rep = numalab("report", str(out), "--out", str(tmp_path / "report.html"), timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((tmp_path / "report.json").read_text())
    (run,) = data["runs"]
    assert run["vcpu_time"] == vt and run["metrics"]["per_vcpu_s"] == m["metrics"]["per_vcpu_s"]
    assert "vCPUs ran" in (tmp_path / "report.html").read_text()

"""numalab run --access-matrix on real VMs (QEMU/TCG, the stock kernel, our plugin): ring-4 and ring-2,
NUMA balancing on and off, and the self-check catching a wrong address map."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from common import REPO, numalab

pytestmark = [pytest.mark.vm, pytest.mark.usefixtures("host_shared")]  # (a real libvirtd)

# Small and short: 1 vCPU per node, numa01-thread-alloc for a few seconds.
RING4 = ["--topology", "ring-4", "--cpus-per-node", "1", "--mem-per-node", "256M"]
RING2 = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M"]


def _run(tmp_path, name: str, *args: str, ok: bool = True) -> dict:
    out = tmp_path / name
    proc = numalab(
        "run", *args, "--accel", "tcg", "--no-trace", "--access-matrix", "--out", str(out), "--json", timeout=300
    )
    if ok:
        assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert json.loads((out / "access-matrix.json").read_text()) == m["access_matrix"]
    assert "-plugin" in (out / ("domain.xml" if "libvirt" in args else "qemu-argv.txt")).read_text()
    return m


def _check_structure(m: dict, nodes: int) -> None:
    a = m["access_matrix"]
    assert a["problem"] is None and m["status"] == "ok"
    assert a["plugin"]["address_mode"] == "ram-block"  # Debian 12's QEMU 7.2
    mat = a["matrix"]
    assert len(mat) == nodes and all(len(row) == nodes for row in mat)
    # Every node's CPU touched memory, and most of the workload's accesses are RAM on some node.
    assert all(sum(row) > 0 for row in mat)
    assert a["outside_share"] < 0.001 and a["complete"] and a["window_from_stages"]
    if m["backend"]["name"] == "qemu":  # qboot (make setup's QEMU ships it): nothing at all outside the nodes
        assert m["firmware"]["name"] == "qboot" and a["outside_whole_run"] == 0
    assert a["accesses"] == sum(map(sum, mat)) > 1000
    # The window is the workload's, give or take one snapshot period.
    start, end = a["window_s"]
    period = a["interval_ms"] / 1000
    assert -period - 0.3 <= start <= 0 and m["workload"]["duration_s"] - 0.5 <= end <= m["timings"]["workload_s"] + 1
    # The time series adds up to the window's matrix.
    summed = [[sum(s["matrix"][i][j] for s in a["series"]) for j in range(nodes)] for i in range(nodes)]
    assert summed == mat
    assert a["local_pct"] == round(100 * sum(mat[i][i] for i in range(nodes)) / a["accesses"], 2)


def test_ring4_balancing_on_is_more_local_than_off(tmp_path) -> None:
    args = [*RING4, "--workload", "numa01-thread-alloc", "--duration", "10"]
    off = _run(tmp_path, "off", *args, "--numa-balancing", "off")
    on = _run(tmp_path, "on", *args, "--numa-balancing", "on")
    for m in (off, on):
        _check_structure(m, 4)
    assert off["metrics"]["vmstat"].get("numa_pages_migrated", 0) == 0
    assert on["metrics"]["vmstat"]["numa_pages_migrated"] > 0
    # Measured here (two cores shared with other engineers' VMs), whole-window access-local %, off vs on:
    # 8 s: 57/90, 62/73, 65/88, 79/82; 12 s: 67/77, 48/80. On was more local in every pair, but by 3 to 33
    # points: numa01-thread-alloc's prefault phase (each thread touches the whole process area, a few
    # seconds under the plugin) is about 80% local either way, and where balancing off lands depends on
    # where the threads ran then. So the direction is asserted, not a margin.
    lp = {k: m["access_matrix"]["local_pct"] for k, m in (("off", off), ("on", on))}
    assert lp["on"] > lp["off"], lp
    # The report: a heatmap and the local-% timeline for each run, access-local % compared.
    proc = numalab("report", str(tmp_path / "off"), str(tmp_path / "on"), "--out", str(tmp_path / "r.html"))
    assert proc.returncode == 0, proc.stderr
    html = (tmp_path / "r.html").read_text()
    assert html.count("Memory accesses by node") == 2 and "local % over time" in html
    data = json.loads((tmp_path / "r.json").read_text())
    rows = {r["metric"]: r for r in data["comparisons"][0]["metrics"]}
    assert "access_local_pct" in rows and "workload.gbps" not in rows


def test_ring2_balancing_on_and_off_give_a_sound_matrix(tmp_path) -> None:
    """On ring-2 balancing off was as local as on in some runs (99% both ways with 2 vCPUs per node) and
    less in others (72% against 92% with 1): where numa01-thread-alloc's threads ran while they prefaulted
    decides. Only the structure is asserted."""
    args = [*RING2, "--workload", "numa01-thread-alloc", "--duration", "4"]
    for bal in ("off", "on"):
        m = _run(tmp_path, bal, *args, "--numa-balancing", bal)
        _check_structure(m, 2)
        assert len(m["access_matrix"]["per_vcpu"]) == 2


def test_a_wrong_address_map_fails_the_run(tmp_path) -> None:
    """QEMU 7.2 reports node 1 at 2x its base; the 8.2+ map (contiguous) leaves it outside every node."""
    m = _run(
        tmp_path, "bad", *RING2, "--workload", "idle", "--duration", "1", "--access-address-map", "guest-physical",
        ok=False,
    )  # fmt: skip
    assert m["status"] == "access-map-mismatch"
    assert "outside every node" in m["reason"]
    assert m["access_matrix"]["outside"] > 0 and m["access_matrix"]["outside_first"]


@pytest.mark.libvirt
def test_libvirt_passes_the_plugin_through(tmp_path) -> None:
    """The local system daemon: the plugin is uploaded into the pool, the counts come back with the results."""
    up = subprocess.run([sys.executable, "-m", "lab.host.libvirtd", "up", "--json"], cwd=REPO, capture_output=True,
                        text=True, timeout=120)  # fmt: skip
    assert up.returncode == 0, up.stderr
    args = [*RING2, "--workload", "numa01-thread-alloc", "--duration", "3", "--backend", "libvirt"]
    m = _run(tmp_path, "lv", *args)
    assert m["backend"]["name"] == "libvirt"
    _check_structure(m, 2)
    xml = (tmp_path / "lv" / "domain.xml").read_text()
    assert "<qemu:commandline>" in xml and ".plugin.so," in xml
    # SeaBIOS (libvirt's firmware) reads a few ROM bytes outside the nodes: a trace, under the limit.
    assert m["access_matrix"]["outside_share"] < 0.001

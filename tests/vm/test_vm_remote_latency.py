"""numalab run --remote-latency on a real VM (QEMU/TCG, the stock kernel, the plugin): the guest's own
pointer chase (latency-matrix) sees remote memory cost what the SLIT says, and nothing without it.

ring-2 with one vCPU a node: SLIT 10/20, so a remote miss should take 2x a local one. L, the local miss the
ratio scales, is calibrated by the test itself: a first slit run's local pairs (uncharged, with the plugin
loaded) give the local step's time on this host; the second slit run charges (2 - 1) x that.
"""

from __future__ import annotations

import json

import pytest
from common import numalab

pytestmark = pytest.mark.vm

RING2 = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--workload", "latency-matrix",
         "--duration", "4", "--accel", "tcg", "--no-trace", "--numa-balancing", "off"]  # fmt: skip
# The measured remote/local ratio against the configured one (docs/throughput.md has the runs): the
# calibrated slit runs here measured 1.80-2.2 for 2.0; the chase's local step under TCG moves with the
# host's load (2 cores shared with other engineers' VMs) between the calibration and the run.
SLIT_TOLERANCE = 0.25
OFF_TOLERANCE = 0.15  # without the plugin every node is the same host memory


def _run(tmp_path, name: str, *extra: str) -> dict:
    out = tmp_path / name
    proc = numalab("run", *RING2, *extra, "--out", str(out), "--json", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m["reason"]
    r = m["workload"]["result"]
    assert r["rounds"] >= 3 and all(p["placed"] == 1.0 for p in r["pairs"]), r  # every page on its node
    return m


def _remote(m: dict) -> dict[tuple[int, int], float]:
    return {(p["cpu_node"], p["mem_node"]): p["ratio"] for p in m["workload"]["result"]["pairs"]
            if p["cpu_node"] != p["mem_node"]}  # fmt: skip


def test_remote_latency_follows_the_slit_and_off_is_flat(tmp_path) -> None:
    off = _run(tmp_path, "off")
    assert "remote_latency" not in off and "-plugin" not in (tmp_path / "off" / "qemu-argv.txt").read_text()
    ratios = _remote(off)
    assert len(ratios) == 2 and all(abs(r - 1) <= OFF_TOLERANCE for r in ratios.values()), ratios

    calib = _run(tmp_path, "calib", "--remote-latency", "slit")
    local_ns = min(p["ns_min"] for p in calib["workload"]["result"]["pairs"] if p["cpu_node"] == p["mem_node"])
    slit = _run(tmp_path, "slit", "--remote-latency", "slit", "--remote-latency-ns", f"{local_ns:.1f}")
    rl = slit["remote_latency"]
    assert rl["problem"] is None and rl["complete"] and rl["model"]["local_ns"] == round(local_ns, 1)
    assert rl["model"]["ratios"] == [[1.0, 2.0], [2.0, 1.0]]
    assert "-plugin" in (tmp_path / "slit" / "qemu-argv.txt").read_text()
    # The plugin charged remote misses and held the vCPUs for them (an overshoot is credited, so held ~ charged).
    w = rl["window"]
    assert w["charged_s"] > 0.1 and abs(w["held_s"] - w["charged_s"]) <= 0.05 * w["charged_s"] + 0.001, w
    assert 30 < w["remote_miss_pct"] < 70  # half the pairs are remote
    measured = _remote(slit)
    configured = {(i, j): rl["model"]["ratios"][i][j] for i, j in measured}
    assert all(abs(measured[k] / configured[k] - 1) <= SLIT_TOLERANCE for k in measured), (measured, configured)

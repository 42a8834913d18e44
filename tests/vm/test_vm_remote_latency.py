"""numalab run --remote-latency on a real VM (QEMU/TCG, the stock kernel, the plugin): the guest's own
pointer chase (latency-matrix) sees remote memory cost what the SLIT says, and nothing without it.

ring-2 with one vCPU a node: SLIT 10/20, so a remote miss should take 2x a local one. L, the local miss the
ratio scales, is calibrated by the test itself: a first slit run's local pairs (uncharged, with the plugin
loaded) give the local step's time on this host; the second slit run charges (2 - 1) x that.
"""

from __future__ import annotations

import json
import math

import pytest
from common import numalab

pytestmark = [pytest.mark.vm, pytest.mark.alone]  # (the chase is timed on the host)

RING2 = ["--topology", "ring-2", "--cpus-per-node", "1", "--mem-per-node", "256M", "--workload", "latency-matrix",
         "--duration", "4", "--accel", "tcg", "--no-trace", "--numa-balancing", "off"]  # fmt: skip
# The measured remote/local ratio against the configured one (docs/throughput.md has the runs): four
# calibrated slit runs here measured 1.70-1.92 for 2.0 (off: 0.96-1.09); the chase's local step under TCG
# moves with the host's load (2 cores shared with other engineers' VMs) between the calibration and the run.
SLIT_TOLERANCE = 0.25
OFF_TOLERANCE = 0.15  # without the plugin every node is the same host memory


def _run(tmp_path, name: str, *extra: str, base: tuple[str, ...] = ()) -> dict:
    out = tmp_path / name
    proc = numalab("run", *(base or RING2), *extra, "--out", str(out), "--json", timeout=400)
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m["reason"]
    r = m["workload"]["result"]
    assert r["rounds"] >= 3 and all(p["placed"] == 1.0 for p in r["pairs"]), r  # every page on its node
    return m


def _symmetric(m: dict) -> float:
    """sqrt(t01 t10 / (t00 t11)) of the pairs' minimum times (the rounds least disturbed by the host's other
    work): what is the CPU node's alone (a busier host CPU) or the memory node's alone cancels out (under plain
    TCG the guest's node 0 memory was up to 10% slower than node 1's from both CPU nodes here)."""
    (sym,) = m["workload"]["result"]["symmetric"]
    assert (sym["a"], sym["b"]) == (0, 1)
    return sym["ratio"]


def test_remote_latency_follows_the_slit_and_off_is_flat(tmp_path) -> None:
    off = _run(tmp_path, "off")
    assert "remote_latency" not in off and "-plugin" not in (tmp_path / "off" / "qemu-argv.txt").read_text()
    assert abs(_symmetric(off) - 1) <= OFF_TOLERANCE, off["workload"]["result"]

    calib = _run(tmp_path, "calib", "--remote-latency", "slit")
    # L: the local pairs' minimum step times, as the symmetric ratio combines them (their geometric mean).
    local = [p["ns_min"] for p in calib["workload"]["result"]["pairs"] if p["cpu_node"] == p["mem_node"]]
    local_ns = math.prod(local) ** (1 / len(local))
    slit = _run(tmp_path, "slit", "--remote-latency", "slit", "--remote-latency-ns", f"{local_ns:.1f}")
    rl = slit["remote_latency"]
    assert rl["problem"] is None and rl["complete"] and rl["model"]["local_ns"] == round(local_ns, 1)
    assert rl["model"]["ratios"] == [[1.0, 2.0], [2.0, 1.0]]
    assert "-plugin" in (tmp_path / "slit" / "qemu-argv.txt").read_text()
    # The plugin charged remote misses and held the vCPUs for them (an overshoot is credited, so held ~ charged).
    w = rl["window"]
    assert w["charged_s"] > 0.1 and abs(w["held_s"] - w["charged_s"]) <= 0.05 * w["charged_s"] + 0.001, w
    assert 30 < w["remote_miss_pct"] < 70  # half the pairs are remote
    configured = rl["model"]["ratios"][0][1]
    assert abs(_symmetric(slit) / configured - 1) <= SLIT_TOLERANCE, slit["workload"]["result"]


# ring-4, one vCPU a node: SLIT 20 to the neighbours, 30 across, so two charged levels (2x and 3x). Measured
# here (2026-11-24, docs/throughput.md): 2.08-2.29 for 2.0 and 3.30-3.38 for 3.0 (mesh-4, all 2.0:
# 2.19-2.52). The level of every pair against the others holds much better than the absolute ratio, which
# moves with the host's load between the calibration run and the charged one (4 vCPU threads, 2 cores).
RING4 = ["--topology", "ring-4", "--cpus-per-node", "1", "--mem-per-node", "256M", "--workload", "latency-matrix",
         "--duration", "6", "--accel", "tcg", "--no-trace", "--numa-balancing", "off"]  # fmt: skip
RING4_ABS_TOLERANCE = 0.30
RING4_LEVEL_TOLERANCE = 0.15  # the 3x pairs over the 2x pairs, against 1.5


def test_remote_latency_levels_on_ring4(tmp_path) -> None:
    calib = _run(tmp_path, "calib", "--remote-latency", "slit", base=tuple(RING4))
    local = [p["ns_min"] for p in calib["workload"]["result"]["pairs"] if p["cpu_node"] == p["mem_node"]]
    local_ns = math.prod(local) ** (1 / len(local))
    m = _run(tmp_path, "slit", "--remote-latency", "slit", "--remote-latency-ns", f"{local_ns:.1f}", base=tuple(RING4))
    ratios = m["remote_latency"]["model"]["ratios"]
    assert m["remote_latency"]["problem"] is None
    measured = {(s["a"], s["b"]): s["ratio"] for s in m["workload"]["result"]["symmetric"]}
    assert len(measured) == 6, measured
    for (a, b), r in measured.items():
        assert abs(r / ratios[a][b] - 1) <= RING4_ABS_TOLERANCE, (a, b, r, ratios[a][b], measured)
    near = [r for (a, b), r in measured.items() if ratios[a][b] == 2.0]
    far = [r for (a, b), r in measured.items() if ratios[a][b] == 3.0]
    assert len(near) == 4 and len(far) == 2 and min(far) > max(near), measured
    level = math.prod(far) ** (1 / 2) / math.prod(near) ** (1 / 4)
    assert abs(level / 1.5 - 1) <= RING4_LEVEL_TOLERANCE, (level, measured)


def test_remote_latency_table_charges_the_spec_not_the_slit(tmp_path) -> None:
    """amd-2s-xgmi: SLIT 32 (3.2x by slit), latency_ratio 1.7: --remote-latency table charges 1.7x."""
    amd = ["--topology", "amd-2s-xgmi", *RING2[2:]]
    calib = _run(tmp_path, "calib", "--remote-latency", "table", base=tuple(amd))
    local = [p["ns_min"] for p in calib["workload"]["result"]["pairs"] if p["cpu_node"] == p["mem_node"]]
    local_ns = math.prod(local) ** (1 / len(local))
    m = _run(tmp_path, "table", "--remote-latency", "table", "--remote-latency-ns", f"{local_ns:.1f}", base=tuple(amd))
    model = m["remote_latency"]["model"]
    assert model["source"] == "latency_ratio" and model["ratios"] == [[1.0, 1.7], [1.7, 1.0]]
    assert m["topology"]["latency_ratio"] == [[1.0, 1.7], [1.7, 1.0]] and m["topology"]["distances"][0][1] == 32
    measured = _symmetric(m)
    assert abs(measured / 1.7 - 1) <= SLIT_TOLERANCE and measured < 2.5, m["workload"]["result"]  # not 3.2

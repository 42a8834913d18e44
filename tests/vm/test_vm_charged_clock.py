"""--clock virtual with --remote-latency slit on real VMs: the latency model's charge goes into the guest's
instruction-counting clock (numalab's patched QEMU, make setup-qemu-charge; the fixture builds it once if the
cache has none, about 6 minutes on 2 cores).

The guest's own pointer chase (latency-matrix) then measures remote/local ratios equal to the configured
ones, on every pair, whatever the host is doing: here under a busy process on every host core. Measured here
(2026-11-25, docs/throughput.md): every pair of ring-4 and mesh-4 within 3.1% of SLIT/10, a little under it
(the chase's own few instructions a step are not charged). A stock QEMU cannot do it, and says so.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from common import REPO, assert_one_line_error, host_hogs, numalab, qemu10_binary

from lab.trace.tracedat import read_trace

pytestmark = pytest.mark.vm

TOLERANCE = 0.10  # the issue's: every pair's measured ratio within 10% of the configured one


@pytest.fixture(scope="module")
def qemu_charge() -> str:
    proc = subprocess.run([sys.executable, "-m", "lab.host.qemu_charge", "--print-binary"], cwd=REPO,
                          capture_output=True, text=True, timeout=2400)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip()


def test_every_pair_pays_its_slit_ratio_in_guest_time_under_host_load(tmp_path, qemu_charge, built_kernel) -> None:
    out = tmp_path / "ring4"
    with host_hogs():
        proc = numalab("run", *built_kernel, "--topology", "ring-4", "--cpus-per-node", "1", "--mem-per-node", "256M",
                       "--workload", "latency-matrix", "--duration", "4", "--no-trace", "--numa-balancing", "off",
                       "--qemu", "charge", "--clock", "virtual", "--remote-latency", "slit", "--out", str(out),
                       "--json", timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m["reason"]
    argv = m["backend"]["argv"]
    assert argv[0] == qemu_charge and "-icount" in argv and "lat_clock=virtual" in " ".join(argv)
    rl = m["remote_latency"]
    assert rl["problem"] is None and rl["model"]["clock"] == "virtual" and rl["model"]["local_ns"] == 100.0
    assert rl["line_changes_only"]  # images/qemu/0005: the plugin called on each change of line only
    w = rl["window"]
    assert w["charged_s"] > 0.1 and w["held_s"] == pytest.approx(w["charged_s"], rel=0.01), w  # all on the clock
    # the chase ran on every node's vCPU: each saw misses (a plugin told the wrong vCPU would give all to one)
    assert all(sum(v["misses"]) > 1000 for v in w["per_vcpu"]), w["per_vcpu"]
    r = m["workload"]["result"]
    assert r["rounds"] >= 3 and all(p["placed"] == 1.0 for p in r["pairs"]), r
    ratios = rl["model"]["ratios"]
    local = {p["cpu_node"]: p["ns_median"] for p in r["pairs"] if p["cpu_node"] == p["mem_node"]}
    for p in r["pairs"]:
        c, mem = p["cpu_node"], p["mem_node"]
        measured = p["ns_median"] / local[c]
        assert abs(measured / ratios[c][mem] - 1) <= TOLERANCE, (c, mem, measured, ratios[c][mem])


def test_a_stock_qemu_cannot_charge_the_clock_and_says_so(tmp_path) -> None:
    stock = qemu10_binary()
    base = ["run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--clock", "virtual",
            "--qemu", stock, "--out", str(tmp_path / "x")]  # fmt: skip
    proc = numalab(*base, "--remote-latency", "slit", timeout=120)
    assert_one_line_error(proc, "--remote-latency with --clock virtual: QEMU 10.0.2")
    assert "make setup-qemu-charge, then add --qemu charge" in proc.stderr
    proc = numalab(*base, "--access-matrix", timeout=120)
    assert_one_line_error(proc, "--access-matrix with --clock virtual: QEMU 10.0.2 tells plugins the wrong vCPU")
    assert not (tmp_path / "x").exists()


def _record(path) -> dict:
    return json.loads((path / "manifest.json").read_text())


def test_same_seed_same_run_other_seed_other_run(tmp_path, qemu_charge, built_kernel) -> None:
    """Runs that repeat exactly (docs/qemu.md): ring-2 (4 vCPUs) numa01 under --clock virtual with numalab's
    QEMU, seed 0 twice (a run alone, then the first of a --repeat 2 batch) and seed 1 (the batch's second).
    The same seed gives the same trace.dat event sequence (every NUMA event at the same guest time, on the
    same CPU, for the same task), the same counters and the same figures; another seed another path. Without
    the fix (QEMU's default RTC, the 9p work on worker threads) 6 of 6 such runs took different paths here.
    Cost: three runs, about 50 s each on a quiet host with the stock kernel (numalab's, here, boots faster)."""
    base = ["run", *built_kernel, "--topology", "ring-2", "--workload", "numa01", "--duration", "3", "--qemu", "charge",
            "--clock", "virtual"]  # fmt: skip
    alone = numalab(*base, "--seed", "0", "--out", str(tmp_path / "alone"), timeout=900)
    assert alone.returncode == 0, alone.stderr[-3000:]
    batch = numalab(*base, "--repeat", "2", "--out", str(tmp_path / "batch"), timeout=1800)
    assert batch.returncode == 0, batch.stderr[-3000:]
    runs = [tmp_path / "alone", tmp_path / "batch" / "r1", tmp_path / "batch" / "r2"]
    ms = [_record(r) for r in runs]
    assert [m["status"] for m in ms] == ["ok"] * 3
    assert [m["accelerator"]["clock"]["seed"] for m in ms] == [0, 0, 1]
    assert all(m["backend"]["argv"][0] == qemu_charge for m in ms)
    paths = [m["metrics"]["trajectory"] for m in ms]
    assert paths[0] == paths[1], paths  # events, vmstat and the workload's output: every part
    assert paths[2]["path"] != paths[0]["path"], paths
    events = [read_trace(r / "trace.dat").events for r in runs]
    assert len(events[0]) > 20 and events[0] == events[1]
    assert ms[0]["workload"]["result"] == ms[1]["workload"]["result"]
    assert ms[0]["metrics"]["vmstat"] == ms[1]["metrics"]["vmstat"]
    assert f"trajectory {paths[0]['path']} (seed 0: " in alone.stdout

"""Issue 67's third known answer: what 7.x's cache-aware scheduling is worth under the model that prices an LLC
(make test-fidelity; not in make test).

The process of test_kernel_73's known answer 2 (tests/data/workloads/threads.c: two threads that each increment
every line of one 256 KiB buffer, started on a node's two LLCs and then free) on one node of two LLCs of 4 CPUs
(tests/data/one-node-2llc.yaml), 7.3 with ``llc_balancing/enabled`` 1 against 0, under m1 with coherence on, so
that a line moved between the two LLCs costs the spec's LLC-to-LLC price (a sweep's: the node's stream price,
6.4 ns a line at 10 GB/s) and a line shared inside one LLC nothing.

The known answer: with cache-aware scheduling on, the threads gather on one LLC and pass over the buffer several
times faster; with it off they stay spread and every line of every pass moves between the LLCs. The size follows
from the costs: per pass, the spread side's guest time over the gathered side's is the charge for the lines moved
(the model's own count of them, ``llc_transfer_s``), within 15 %. Before issue 67 the model charged nothing for a
move inside a node, and the two sides' throughput would have been the same by construction.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from common import REPO, numalab, static_workload

from lab.paths import cache_dir, file_lock

pytestmark = [pytest.mark.fidelity, pytest.mark.vm, pytest.mark.kernel_build]

RUNS = 3
DURATION_S = 4
THREADS = 2
LINES = 256 * 1024 // 64  # the buffer's lines: one transfer each a pass on the spread side
GATHER = (REPO / "tests" / "data" / "gather.yaml").read_text()  # (test_kernel_73's known answer 2's workload)
TOLERANCE = 0.15


@pytest.fixture(scope="module")
def v73() -> str:
    """7.3 as test_kernel_73 builds it (a cache hit after make test)."""
    with file_lock(cache_dir("test-trees") / ".v7.3-build.lock"):
        proc = numalab("kernel", "build", "--json", "--source", "debian:7.3", "--name", "v7.3", timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)["name"]


def _side(tmp_path: Path, workload: Path, kernel: str, enabled: int) -> tuple[list[dict], list[str]]:
    out = tmp_path / f"llc{enabled}"
    proc = numalab("run", "--kernel", kernel, "--topology", str(REPO / "tests" / "data" / "one-node-2llc.yaml"),
                   "--workload", str(workload), "--duration", str(DURATION_S), "--knob",
                   f"llc_balancing/enabled={enabled}", "--model", "m1", "--coherence", "on", "--repeat", str(RUNS),
                   "--out", str(out), "--json", "--timeout", "1200", timeout=RUNS * 1500)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    paths = sorted(out.glob("*/manifest.json"))
    runs = [json.loads(p.read_text()) for p in paths]
    assert len(runs) == RUNS and all(m["status"] == "ok" for m in runs), [(m["label"], m["reason"]) for m in runs]
    return runs, [str(p.parent) for p in paths]


def _figures(runs: list[dict]) -> dict:
    windows = [m["remote_latency"]["window"] for m in runs]
    return {
        "loops": [m["workload"]["result"]["loops"] for m in runs],
        "one_llc_share_late": [m["metrics"]["numa"]["llc"]["residency"]["one_llc_share_late"] for m in runs],
        "llc_transfers": [w["llc_transfers"] for w in windows],
        "llc_transfer_s": [w["llc_transfer_s"] for w in windows],
        "node_transfers": [w["transfers"] - w["llc_transfers"] for w in windows],
    }


def test_cache_aware_scheduling_gathers_a_sharing_process_and_the_model_prices_what_it_saves(tmp_path, v73) -> None:
    workload = static_workload(tmp_path, "threads", (REPO / "tests" / "data" / "workloads" / "threads.c").read_text(),
                               GATHER)  # fmt: skip
    (on_runs, on_dirs), (off_runs, off_dirs) = _side(tmp_path, workload, v73, 1), _side(tmp_path, workload, v73, 0)
    on, off = _figures(on_runs), _figures(off_runs)
    model = on_runs[0]["remote_latency"]["model"]["coherence"]
    print(f"\nllc_balancing on: {json.dumps(on)}\nllc_balancing off: {json.dumps(off)}\nmodel: {json.dumps(model)}")
    assert model["owners"] == "llc" and model["llc_transfer_ns"] == [80.0], model
    # the mechanism: gathered late with the knob on, spread with it off (test_kernel_73's answer 2, under the model)
    assert min(on["one_llc_share_late"]) >= 0.9 and max(off["one_llc_share_late"]) <= 0.6, (on, off)
    assert sum(on["node_transfers"]) == sum(off["node_transfers"]) == 0  # (one node)
    # the sign, with significance: more passes gathered
    proc = numalab("compare", "--baseline", *off_dirs, "--new", *on_dirs, "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    loops = {r["metric"]: r for r in json.loads(proc.stdout)["metrics"]}["workload.loops"]
    said = {k: loops.get(k) for k in ("diff_text", "significant", "p_value", "verdict")}
    print(f"workload.loops: {json.dumps(said)}")
    assert loops["significant"] and statistics.mean(on["loops"]) > statistics.mean(off["loops"]), loops
    # the size: a pass's guest time (the threads' busy time over the passes) on each side, and the difference
    # against the model's charge for the lines moved between the LLCs a pass
    busy_s = THREADS * DURATION_S
    per_pass = {k: statistics.mean(busy_s / n for n in side["loops"]) for k, side in (("on", on), ("off", off))}
    moved = {k: statistics.mean(s / n for s, n in zip(side["llc_transfer_s"], side["loops"]))
             for k, side in (("on", on), ("off", off))}  # fmt: skip
    predicted = moved["off"] - moved["on"]
    measured = per_pass["off"] - per_pass["on"]
    print(f"a pass: on {per_pass['on'] * 1e6:.2f} us, off {per_pass['off'] * 1e6:.2f} us; the difference "
          f"{measured * 1e6:.2f} us against the model's charge for moved lines {predicted * 1e6:.2f} us; lines moved a "
          f"pass off {statistics.mean(t / n for t, n in zip(off['llc_transfers'], off['loops'])):.0f} (of {LINES} "
          f"a thread); throughput on / off {per_pass['off'] / per_pass['on']:.2f}")  # fmt: skip
    assert predicted > 0 and abs(measured - predicted) <= TOLERANCE * measured, (per_pass, moved)

"""Issue 66's K4, hand-offs priced by the transfer: its sleeping half (make test-fidelity; not in make test).

Two processes pinned to two CPUs of ring-2 hand a token over two pipes (tests/handoff.py: each side sleeps until the
other wakes it, an IPI), on one node (CPUs 0 and 1) and across the two (0 and 2), under the modelled machine m1 with
coherence on, balancing off, 1 guest s a run, at two quanta. The known answer: the cross-node round trip less the
same-node one is the line transfers the coherence model charged a cross-node round trip (within 10%), and the
same-node round trip does not depend on the quantum (within 2%).

It fails on numalab's QEMU series: a vCPU another wakes joins at the machine's time, up to a quantum before the
wake-up, and the ratio is 0.50 at 0.5 us and 0.51 at 2 us. images/qemu/experiments/wake-at-wakers-time.patch (a
woken vCPU starts at its waker's time) passes it, 0.991 at both, and changes K5, so it is not in the series. The test
is a strict expected failure: it goes red the day the series passes it, and the mark goes then.

The spinning half (a shared counter each side waits on) is not asserted: a spinner sees the other's write at its
next slice, so that round trip costs the quantum, not the transfers (docs/throughput.md, K4; tests/bench/handoffs.py
prints it). Four runs, 7-10 host minutes beside another VM.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab
from handoff import handoff_workload

pytestmark = [pytest.mark.fidelity, pytest.mark.vm]

QUANTA_NS = (500, 2000)


def _trip(tmp_path: Path, cpus: tuple[int, int], quantum: int) -> dict:
    d = tmp_path / f"pipe-{cpus[0]}{cpus[1]}-q{quantum}"
    d.mkdir()
    workload = handoff_workload(d, "pipe", *cpus)
    proc = numalab("run", "--topology", "ring-2", "--workload", str(workload), "--duration", "1", "--model", "m1",
                   "--coherence", "on", "--quantum", str(quantum), "--numa-balancing", "off", "--no-trace",
                   "--out", str(d / "run"), "--json", timeout=1800)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m["reason"]
    trips, window = m["workload"]["result"]["round_trips"], m["remote_latency"]["window"]
    return {
        "rtt_ns": m["workload"]["result"]["rtt_ns"],
        "transfers": round(window["transfers"] / trips, 1),
        "transfer_ns": round(window["transfer_s"] * 1e9 / trips, 1),
        "host_s": round(m["timings"]["total_s"]),
    }


@pytest.mark.xfail(
    strict=True,
    reason="K4 fails on the series: a woken vCPU joins at the machine's time "
    "(docs/throughput.md, K4; images/qemu/experiments/wake-at-wakers-time.patch passes it)",
)
def test_known_answer_k4_a_pipe_hand_off_costs_its_transfers_at_any_quantum(tmp_path: Path) -> None:
    same, ratio = {}, {}
    for q in QUANTA_NS:
        same[q], cross = _trip(tmp_path, (0, 1), q), _trip(tmp_path, (0, 2), q)
        ratio[q] = (cross["rtt_ns"] - same[q]["rtt_ns"]) / cross["transfer_ns"]
        print(
            f"\nK4 pipe at {q} ns: one node {same[q]}, two nodes {cross}: (cross - same) / transfers = {ratio[q]:.3f}"
        )
        assert cross["transfers"] > 10, cross  # the coherence model charged the hand-off's lines
    assert all(0.9 <= r <= 1.1 for r in ratio.values()), ratio
    low, high = (same[q]["rtt_ns"] for q in QUANTA_NS)
    assert abs(low - high) <= 0.02 * high, same

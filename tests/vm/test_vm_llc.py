"""Issue 48's known answer: where a wakeup puts a pipe ping-pong's wakee, with two LLCs in a node and with one.

On ``spr-2s-2llc`` (2 nodes x 4 CPUs, LLCs {0-1},{2-3},{4-5},{6-7}) ``select_idle_sibling`` looks for an idle
CPU in the target's LLC, the waker's on a sync pipe wakeup: the wakee is put in the waker's LLC. On the same
CPUs, nodes and SLIT as one LLC a node (the spec below: ``llcs_per_node: 1``, ``packages: 2``) the LLC is the
node, the wakee's previous CPU is kept when it is idle, and it lands anywhere on the node. So the share of
wakeups whose chosen CPU is in the waker's half-node ({0-1},{2-3},...) is high on the first and about a third
on the second.

The workload is a small static program built here: new task pairs one after another, 20 round trips each, for
3 s, so that a run holds dozens of pairs, each placed anew. ``perf-sched-pipe`` (2000 round trips a perf run)
did not fit: a 3 s run under TCG holds 2 or 3 pairs, and on one LLC a node the share is whichever halves those
few pairs happened to start in (0.0, 0.34, 0.35, 0.60 and 0.34 in five runs; 0.71, 0.98, 1.0, 1.0, 1.0 on two
LLCs a node).

Measured (stock 6.1, TCG, NUMA balancing off, a 2-core host shared with other VMs; the fraction of the
workload's paired wakeups in the waker's half-node), five runs of each: two LLCs a node 0.949, 0.954, 0.955,
0.956, 0.957 (and 0.991 with 100 round trips a pair); one LLC a node 0.358, 0.385, 0.399, 0.405, 0.435 (0.265).
The test is two runs of 10-15 s each (20-25 s in all with the build).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llc_pingpong import MARGIN, ONE_LLC, TWO_LLC_MIN, half_node_share, pingpong_workload, run_pingpong

pytestmark = pytest.mark.vm


def test_a_wakee_is_woken_in_the_wakers_llc(tmp_path: Path) -> None:
    workload = pingpong_workload(tmp_path)
    (tmp_path / "spr-2s-1llc.yaml").write_text(ONE_LLC)
    two = run_pingpong(tmp_path, "spr-2s-2llc", workload)
    one = run_pingpong(tmp_path, str(tmp_path / "spr-2s-1llc.yaml"), workload)
    two_share, two_w = half_node_share(two)
    one_share, one_w = half_node_share(one)
    print(f"half-node share of wakeups: two LLCs a node {two_share:.3f}, one LLC a node {one_share:.3f}")
    assert two_share >= TWO_LLC_MIN, two_w["workload"]
    assert two_share - one_share >= MARGIN, (two_share, one_share)
    # two LLCs a node: the half-node is the LLC; one LLC a node: nothing is "another LLC of the node"
    assert two_w["workload"]["waker_llc_pct"] == pytest.approx(100 * two_share)
    assert one_w["workload"]["waker_node"] == 0 and one_w["workload"]["waker_llc_pct"] > 90
    # the views by LLC: the 2-LLC machine's four LLCs, the workload's time on them adding up
    view = two["metrics"]["numa"]["llc"]
    assert [x["cpus"] for x in view["llcs"]] == ["0-1", "2-3", "4-5", "6-7"]
    assert sum(view["residency"]["share"]) == pytest.approx(1.0)
    assert [x["cpus"] for x in one["metrics"]["numa"]["llc"]["llcs"]] == ["0-3", "4-7"]
    assert one["metrics"]["numa"]["llc"]["migrations"]["all"]["between_llcs"] == 0

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

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from common import numalab

from lab.analysis.llc import llc_of
from lab.events import WAKEUP, WAKING
from lab.topology.spec import load_topology

pytestmark = pytest.mark.vm

TWO_LLC_MIN = 0.85  # measured 0.949-0.957 (0.991)
MARGIN = 0.3  # two LLCs a node over one: measured 0.51 to 0.60

PINGPONG_C = r"""
/* pingpong SECONDS TRIPS: task pairs one after another, each a new pair of processes ping-ponging a byte over
 * two pipes TRIPS times; prints "pairs N". */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void side(int rd, int wr, int trips, int first) {
    char c = 0;
    for (int i = 0; i < trips; i++) {
        if (first && write(wr, &c, 1) != 1) _exit(1);
        if (read(rd, &c, 1) != 1) _exit(1);
        if (!first && write(wr, &c, 1) != 1) _exit(1);
    }
    _exit(0);
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 3);
    int trips = argc > 2 ? atoi(argv[2]) : 20;
    long pairs = 0;
    while (now() < end) {
        int a[2], b[2];
        if (pipe(a) || pipe(b)) return 1;
        if (fork() == 0) side(a[0], b[1], trips, 1);
        if (fork() == 0) side(b[0], a[1], trips, 0);
        close(a[0]); close(a[1]); close(b[0]); close(b[1]);
        while (wait(NULL) > 0)
            ;
        pairs++;
    }
    printf("pairs %ld\n", pairs);
    return 0;
}
"""

WORKLOAD = """\
name: pingpong
description: new task pairs one after another, each ping-ponging a byte over two pipes 20 times
command: ./pingpong {duration} 20
files: [pingpong]
results:
  regex: {pairs: '^pairs (\\d+)$'}
metrics:
  - {name: pairs, unit: pairs, higher_is_better: true}
"""

# spr-2s-2llc's nodes, CPUs and SLIT with one LLC a node
ONE_LLC = """\
name: spr-2s-1llc
description: spr-2s-2llc with one LLC a node
nodes: 2
cpus_per_node: 4
memory_per_node: 512M
packages: 2
llcs_per_node: 1
distances:
  - [10, 21]
  - [21, 10]
"""


def _workload(tmp_path: Path) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is part of make setup")
    src = tmp_path / "pingpong.c"
    src.write_text(PINGPONG_C)
    subprocess.run(["gcc", "-static", "-O1", "-o", str(tmp_path / "pingpong"), str(src)], check=True, timeout=120)
    (tmp_path / "pingpong.yaml").write_text(WORKLOAD)
    return tmp_path / "pingpong.yaml"


def _run(tmp_path: Path, topology: str, workload: Path) -> dict:
    out = tmp_path / Path(topology).stem
    proc = numalab(
        "run", "--topology", topology, "--workload", str(workload), "--duration", "3", "--numa-balancing", "off",
        "--event", WAKING.full, "--event", WAKEUP.full, "--out", str(out), "--json", "--timeout", "150",
        timeout=200,
    )  # fmt: skip
    m = json.loads(proc.stdout) if proc.stdout.strip() else {}
    seen = "\n".join([proc.stderr[-3000:], *m.get("console_tail", [])])
    assert proc.returncode == 0 and m.get("status") == "ok", seen
    assert m["guest_topology_ok"] is True, seen
    assert m["metrics"]["lost_events"] == 0, m["metrics"].get("lost_per_cpu")
    return m


def _half_node_share(m: dict) -> tuple[float, dict]:
    """The share of the workload's paired wakeups whose chosen CPU is in the waker's half-node (spr-2s-2llc's
    LLCs), re-partitioned from the waker CPU x chosen CPU matrix."""
    w = m["metrics"]["numa"]["llc_wakeups"]
    half = llc_of(load_topology("spr-2s-2llc"))
    matrix = w["workload"]["matrix"]
    total = sum(map(sum, matrix))
    same = sum(n for a, row in enumerate(matrix) for b, n in enumerate(row) if half[a] == half[b])
    assert total == w["workload"]["wakeups"] >= 300, w["workload"]["wakeups"]  # dozens of pairs, 40 wakeups each
    assert w["waking_unpaired"] + w["wakeup_unpaired"] <= 0.02 * total, w
    return same / total, w


def test_a_wakee_is_woken_in_the_wakers_llc(tmp_path: Path) -> None:
    workload = _workload(tmp_path)
    (tmp_path / "spr-2s-1llc.yaml").write_text(ONE_LLC)
    two = _run(tmp_path, "spr-2s-2llc", workload)
    one = _run(tmp_path, str(tmp_path / "spr-2s-1llc.yaml"), workload)
    two_share, two_w = _half_node_share(two)
    one_share, one_w = _half_node_share(one)
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

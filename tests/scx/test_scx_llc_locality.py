"""Issue 68's known answer 2: a topology-aware sched_ext scheduler keeps communicating tasks in the waker's LLC,
against one that is not, on a machine of two LLCs a node (genoa-nps2: 2 nodes, 2 LLCs of 2 CPUs each).

scx_bpfland (1.1.4, from crates.io) against the kernel's scx_simple, on 6.12 (v6.12-scx), TCG, NUMA balancing off,
eight long-lived task pairs ping-ponging a byte over two pipes (16 tasks on 8 CPUs: the machine is overloaded, so
a woken task often finds its CPU busy). scx_simple places a wakee with the kernel's built-in idle selection, which
in 6.12 (``scx_select_cpu_dfl``) knows no LLC and no node: the waker's CPU on a sync wakeup when its queue is empty,
else the previous CPU if idle, else any idle CPU; a task that found none waits on one global queue that every CPU
serves. scx_bpfland picks an idle CPU in the previous CPU's LLC, then its node, and queues by node and LLC. So
bpfland keeps more wakeups in the waker's LLC and moves tasks between LLCs less; numalab's compare (Welch's test)
says both, significant.

Not on 7.3: from 6.13 the built-in idle selection that scx_simple uses is itself LLC- and node-aware, and there
scx_simple keeps more wakeups in the waker's LLC than bpfland 1.1.4 (the figures are in docs/sched-ext.md; the
second test records that direction).

make test-scx; needs v6.12-scx and v7.3-scx (test_scx_layered.py builds them) and scx_bpfland 1.1.4 (a cold cargo
build, 8 to 20 minutes here, the first time).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab, static_workload

from lab.events import WAKEUP, WAKING

pytestmark = [pytest.mark.scx, pytest.mark.vm, pytest.mark.kernel_build]

PAIRS_C = r"""
/* pairs SECONDS N: N task pairs, each ping-ponging a byte over two pipes until SECONDS have passed. */
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

static void side(int rd, int wr, double end, int first) {
    char c = 0;
    for (long i = 0;; i++) {
        if ((i & 255) == 255 && now() > end) break;
        if (first && write(wr, &c, 1) != 1) break;
        if (read(rd, &c, 1) != 1) break;
        if (!first && write(wr, &c, 1) != 1) break;
    }
    _exit(0);
}

int main(int argc, char **argv) {
    double end = now() + (argc > 1 ? atof(argv[1]) : 3);
    int n = argc > 2 ? atoi(argv[2]) : 8;
    for (int k = 0; k < n; k++) {
        int a[2], b[2];
        if (pipe(a) || pipe(b)) return 1;
        if (fork() == 0) { close(a[1]); close(b[0]); side(a[0], b[1], end, 1); }
        if (fork() == 0) { close(b[1]); close(a[0]); side(b[0], a[1], end, 0); }
        close(a[0]); close(a[1]); close(b[0]); close(b[1]);
    }
    while (wait(NULL) > 0)
        ;
    printf("pairs %d\n", n);
    return 0;
}
"""

WORKLOAD = """\
name: pipe-pairs
description: eight long-lived task pairs ping-ponging a byte over two pipes (16 tasks)
command: ./pipe-pairs {duration} 8
files: [pipe-pairs]
results:
  regex: {pairs: '^pairs (\\d+)$'}
metrics:
  - {name: pairs, unit: pairs, higher_is_better: true}
"""

BASE, TOPO = "scx_simple", "genoa-nps2"
WAKER_LLC, BETWEEN_LLCS = "llc.wakeups_waker_llc_pct", "llc.migrations_between_llcs"


def _ab(tmp_path: Path, kernel: str, repeat: int) -> dict[str, dict]:
    """scx_simple against scx_bpfland on ``kernel``, ``repeat`` runs a side (A B A B), and numalab compare's rows
    by metric."""
    workload = static_workload(tmp_path, "pipe-pairs", PAIRS_C, WORKLOAD)
    out = tmp_path / kernel
    proc = numalab("run", "--kernel", kernel, "--scheduler", BASE, "--scheduler", "scx_bpfland", "--topology", TOPO,
                   "--workload", str(workload), "--duration", "4", "--numa-balancing", "off", "--event", WAKING.full,
                   "--event", WAKEUP.full, "--repeat", str(repeat), "--out", str(out), "--json",
                   timeout=300 + 120 * repeat)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    for d in sorted(out.glob("*-r*")):
        m = json.loads((d / "manifest.json").read_text())
        assert m["status"] == "ok" and m["scheduler"]["ejected"] is False, (d.name, m["status"], m["reason"])
        assert m["metrics"]["lost_events"] == 0, m["metrics"].get("lost_per_cpu")
    proc = numalab("compare", "--baseline", *map(str, sorted(out.glob(f"{BASE}-r*"))), "--new",
                   *map(str, sorted(out.glob("scx_bpfland-r*"))), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = {r["metric"]: r for r in json.loads(proc.stdout)["metrics"]}
    for k in (WAKER_LLC, BETWEEN_LLCS, "llc.wakeups_other_node_pct", "llc.one_llc_share_late_pct"):
        r = rows[k]
        print(f"{kernel} {k}: {BASE} {r['baseline_mean']:.2f}, scx_bpfland {r['new_mean']:.2f} ({r['diff_text']}; "
              f"95% CI of the difference {r['ci95_diff'][0]:.2f} to {r['ci95_diff'][1]:.2f}; p {r['p_value']:.4f}; "
              f"{r['verdict_text']})")  # fmt: skip
    return rows


def _significant(row: dict, sign: int) -> None:
    """numalab's own verdict: significant (Welch), and its 95% interval of the difference on the side ``sign``."""
    assert row["significant"] is True and row["verdict"] == "changed", row
    assert sign * row["ci95_diff"][0] > 0 and sign * row["ci95_diff"][1] > 0, row


def test_bpfland_keeps_wakeups_in_the_wakers_llc_where_simple_knows_no_llc(tmp_path: Path) -> None:
    rows = _ab(tmp_path, "v6.12-scx", repeat=5)
    _significant(rows[WAKER_LLC], +1)  # more wakeups in the waker's LLC under bpfland
    _significant(rows[BETWEEN_LLCS], -1)  # and fewer task moves between the LLCs of a node


def test_on_7_3_the_builtin_idle_selection_is_llc_aware_and_simple_keeps_more(tmp_path: Path) -> None:
    rows = _ab(tmp_path, "v7.3-scx", repeat=4)
    _significant(rows[WAKER_LLC], -1)

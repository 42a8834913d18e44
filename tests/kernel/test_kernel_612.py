"""Debian's 6.12 source (linux-source-6.12, bookworm-security) with numalab's default fragments (and sched-ext:
the suite's one 6.12 kernel is tests/kernel/conftest.py's v612, which test_sched_ext.py runs schedulers on): it
builds (BASE_FULL, gone around 6.9, is a note in the build log, not an error), boots on ring-4 and ring-2 (1 and 2
CPUs a node, 8 s each), passes the guest topology and sched-group checks, captures the four NUMA events, whose 6.12
formats and /proc/vmstat counters are the ones numalab reads (no interface notes), and brings a misplaced task to
its memory.

It uses the real kernel cache, like tests/kernel/test_kernel_build.py: cold, the 6.12 build took 15 minutes on this
shared 2-core machine (docs/kernels.md); cached, the test is two short VM runs (about 20 s here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, needs_setup_package, numalab
from llc_pingpong import MARGIN, ONE_LLC, TWO_LLC_MIN, half_node_share, pingpong_workload, run_pingpong

SOURCE = Path("/usr/src/linux-source-6.12.tar.xz")
NUMA_EVENTS = ("sched_move_numa", "sched_swap_numa", "sched_stick_numa", "mm_migrate_pages")


@needs_setup_package(SOURCE.is_file(), str(SOURCE), "linux-source-6.12")
@pytest.mark.vm
@pytest.mark.kernel_build
def test_612_builds_with_the_default_fragments_boots_and_traces(tmp_path, v612) -> None:
    built = v612  # (with sched-ext too: the suite builds one 6.12 kernel, tests/kernel/conftest.py)
    assert built["release"].startswith("6.12.") and built["release"].endswith("-numalab"), built["release"]
    build_log = (Path(built["path"]) / "build.log").read_text()
    assert "note: kernel config: CONFIG_BASE_FULL=y (from base.config) does not exist in Linux 6.12." in build_log
    config = (Path(built["path"]) / "config").read_text()
    assert "CONFIG_NUMA_BALANCING=y" in config and "CONFIG_SCHED_DEBUG=y" in config  # 6.12 still has SCHED_DEBUG

    # ring-4 (overlapping NUMA groups: the sched-group check means something) with numa01: the four events traced
    # and readable, NUMA balancing migrating pages.
    m = _run(tmp_path / "ring4", "ring-4", "numa01")
    assert m["kernel"]["guest_release"] == built["release"]
    groups = m["guest_topology"]["sched_groups"]
    assert groups["checked"] and groups["unchecked_cpus"] == [], groups
    events = m["metrics"]["events"]
    assert set(NUMA_EVENTS) <= set(events), events  # all four enabled and read back from 6.12's trace.dat
    assert events["mm_migrate_pages"] > 0 and m["metrics"]["vmstat"]["numa_hint_faults"] > 0, events
    # ring-2 with misplaced (one task on node 1, its memory bound to node 0, still scanned): NUMA balancing must
    # bring the task to its memory, by decisions decoded by their node fields. With communicating pairs instead,
    # 8 s gave 0 to 132 decisions (0 in 1 of 6 runs here, and in CI). Two CPUs a node: with one, the load
    # balancer got the task there first in 1 of 8 runs of 6.1 (no NUMA decision at all); with two, 6.1's
    # balancing moved it in 5 of 5 (one sched_move_numa each, after 0.46-0.56 s); see below for 6.12.
    m = _run(tmp_path / "ring2", "ring-2", "misplaced", cpus_per_node=2)
    events = m["metrics"]["events"]
    decisions = sum(events[e] for e in NUMA_EVENTS[:3])
    node_moves = m["metrics"]["numa"]["node_moves"]
    placed = sum(sum(map(sum, k["matrix"])) + k["without_destination"] for k in node_moves.values())
    assert placed == decisions and node_moves["move"]["without_destination"] == 0, node_moves
    result = m["workload"]["result"]
    assert (result["task_node_start"], result["mem_node"]) == (1, 0), result
    assert result["ended_on_mem_node"] and result["local_pct"] == 100.0, result
    # Who moved it: NUMA balancing's own move or swap (decoded 1 -> 0), or the load balancer, which got there first
    # in 4 of 10 runs of the sched-ext v6.12 (after 0.29-0.42 s; 1 of 8 on the default-fragment 6.12): a cross-node
    # sched_migrate_task 1 -> 0, then no NUMA decision at all. The load balancer is not always balancing's agent
    # (it moved the tutorial's never-scanning kernel's task in 2 of 6 runs): where no decision was made, this run
    # shows only that balancing scanned and that the task ended on its memory, not that balancing brought it.
    moved_to_memory = node_moves["move"]["matrix"][1][0] + node_moves["swap"]["matrix"][1][0]
    lb_to_memory = m["metrics"]["numa"]["cross_node_lb"]["matrix"][1][0]
    assert m["metrics"]["vmstat"]["numa_hint_faults"] > 0, m["metrics"]["vmstat"]
    assert moved_to_memory > 0 or (decisions == 0 and lb_to_memory > 0), (node_moves, lb_to_memory)


def _run(out: Path, topology: str, workload: str, cpus_per_node: int = 1) -> dict:
    proc = numalab("run", "--kernel", "v6.12", "--topology", topology, "--cpus-per-node", str(cpus_per_node),
                   "--mem-per-node", "256M", "--workload", workload, "--duration", "8", "--out", str(out), "--json",
                   timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    m = json.loads(proc.stdout)
    assert m["status"] == "ok", m.get("reason")
    assert m["guest_topology_ok"] is True, m["guest_topology"].get("problems")
    metrics = m["metrics"]
    # 6.12's formats and counters are what numalab reads: nothing noted, nothing skipped for a missing field
    assert not metrics.get("trace_problems") and "interface_notes" not in metrics, metrics.get("interface_notes")
    # every analysis ran, the default events' (sched_migrate_task's cross_node_lb and residency) included
    assert metrics["numa"]["skipped"] == {}, metrics["numa"]["skipped"]
    assert "cross_node_lb" in metrics["numa"] and "residency" in metrics["numa"], sorted(metrics["numa"])
    return m


MACHINES = REPO / "tests" / "data" / "workloads"


@needs_setup_package(SOURCE.is_file(), str(SOURCE), "linux-source-6.12")
@pytest.mark.vm
@pytest.mark.kernel_build
def test_612_on_the_machines_of_2026(tmp_path, v612) -> None:
    """Issue 48's known answers on 6.12 (each a short run: numalab's 6.12 boots in 2-4 s here): the CPU view of
    every new preset is the prediction, with PKG where 6.1 says DIE and a CLS level where an L2 is shared
    (numa.config has SCHED_CLUSTER since issue 65: srf-2s-modules' modules); the SNC-3 machine's SLIT draws the same two
    complaints as on 6.1, since the fix (commit 4d6dd05d07d0) came after 6.12; a memoryless node's task gets its
    memory from the nearest node with memory; the uneven machine's node of two LLCs has MC and NODE, its node of
    one LLC MC alone."""
    runs = {}
    for preset, args in (("spr-2s-2llc", ()), ("gnr-2s-snc3", ()), ("srf-2s-modules", ("--qemu", "backports")),
                         ("memoryless-3", ("--workload", str(MACHINES / "memless.yaml"))),
                         ("nps2-uneven-llc", ()), ("tiered-2s-cxl", ())):  # fmt: skip
        out = tmp_path / preset
        proc = numalab("run", "--kernel", "v6.12", "--topology", preset, "--workload", "idle", *args, "--duration",
                       "1", "--no-trace", "--out", str(out), "--json", "--timeout", "120", timeout=300)  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        m = runs[preset] = json.loads(proc.stdout)
        assert m["status"] == "ok" and m["guest_topology_ok"] is True, (preset, m["guest_topology"]["problems"])
    domains = {p: [(d["name"], d["cpus"]) for d in m["guest_topology"]["sched_domains"]["0"]] for p, m in runs.items()}
    assert domains["spr-2s-2llc"] == [("MC", "0-1"), ("PKG", "0-3"), ("NUMA", "0-7")]
    assert domains["srf-2s-modules"] == [("CLS", "0-1"), ("MC", "0-3"), ("NUMA", "0-7")]
    # an uneven machine: node 0 holds two LLCs under its NODE level, node 1 one LLC that is the whole node
    assert domains["nps2-uneven-llc"] == [("MC", "0-1"), ("NODE", "0-3"), ("NUMA", "0-5")]
    node1 = runs["nps2-uneven-llc"]["guest_topology"]["sched_domains"]["4"]
    assert [(d["name"], d["cpus"]) for d in node1] == [("MC", "4-5"), ("NUMA", "0-5")]
    assert runs["srf-2s-modules"]["guest_topology"]["readback"]["cpus"]["cpus"]["0"]["caches"]["L2"] == "0-1"
    # the guest was shown Granite Rapids X (cpu_model 6/173), the model the fix keys on; 6.12 has no fix to take
    cpus = runs["gnr-2s-snc3"]["guest_topology"]["readback"]["cpus"]
    assert (cpus["vendor"], cpus["family"], cpus["model"]) == ("GenuineIntel", 6, 173)
    complaints = {c["message"]: c["cpus"] for c in runs["gnr-2s-snc3"]["guest_topology"]["kernel_complaints"]}
    assert complaints == {"ERROR: Node-distance not symmetric": [],
                          "ERROR: groups don't span domain->span": [0, 1, 6, 7]}, complaints  # fmt: skip
    # the slow nodes online (above 4 GiB), in the tier the HMAT gives from 6.7 (6.1: memory_tier22)
    tiers = runs["tiered-2s-cxl"]["guest_topology"]["readback"]["memory_tiers"]["tiers"]
    assert tiers == {"memory_tier4": "0-1", "memory_tier28": "2-3"}, tiers
    got = runs["memoryless-3"]["workload"]["result"]
    assert got["node0_kib"] >= 30 * 1024 and got["node1_kib"] == 0 and got["node2_kib"] < 1024, got


RENAME_NUMA_BALANCING = """A Kconfig symbol numalab needs, renamed, as a later kernel might.
--- a/init/Kconfig
+++ b/init/Kconfig
@@ -954,1 +954,1 @@
-config NUMA_BALANCING
+config NUMA_BALANCING_RENAMED
"""


@needs_setup_package(SOURCE.is_file(), str(SOURCE), "linux-source-6.12")
@pytest.mark.kernel_build
def test_symbols_6_12_does_not_have_fail_when_they_matter(tmp_path) -> None:
    """Against the real tree, in about 6 s (the configure step only): a symbol numalab needs that a patch renamed
    (the patched Kconfig is scanned, not the remembered pristine one) and a user fragment's typo both fail, saying
    they do not exist in 6.12; what depends on the renamed one is unmet. (The user fragment also keeps the warm build
    directory of the default fragments out of it.)"""
    patch = tmp_path / "rename.patch"
    patch.write_text(RENAME_NUMA_BALANCING)
    typo = tmp_path / "typo.config"
    typo.write_text("CONFIG_NUMA_BALANCNG=y\n")
    proc = numalab("kernel", "build", "--quiet", "--source", str(SOURCE), "--patch", str(patch), "--fragment",
                   str(typo), timeout=1800)  # fmt: skip
    assert_one_line_error(
        proc,
        "kernel config: 1 fragment symbol(s) not set as requested: CONFIG_NUMA_BALANCING_DEFAULT_ENABLED=y (got unset, "
        "from numa.config): init/Kconfig:969 'depends on NUMA_BALANCING' is n (NUMA_BALANCING=n); and 2 fragment "
        "symbol(s) do not exist in Linux 6.12.",
        "CONFIG_NUMA_BALANCING=y (from numa.config, numalab needs it); CONFIG_NUMA_BALANCNG=y (from typo.config)",
    )


@needs_setup_package(SOURCE.is_file(), str(SOURCE), "linux-source-6.12")
@pytest.mark.vm
@pytest.mark.kernel_build
def test_612_llc_wakeups_and_a_memoryless_node_under_balancing(tmp_path, v612) -> None:
    """Issue 48's two behaviour known answers, 6.12's half (6.1's: tests/vm/test_vm_llc.py, test_vm_machines.py).
    A pipe ping-pong's wakee is woken in the waker's LLC on spr-2s-2llc and anywhere on the node with one LLC a
    node: measured on 6.12 here 0.955 and 0.957 against 0.434 and 0.371 of the wakeups in the waker's half-node
    (6.1: 0.949-0.957 against 0.358-0.435). numa01 with balancing on memoryless-3 completes with its events traced
    (two runs: 12,022 and 16,364 hint faults, 4,756 and 23,411 pages migrated). About 20 s of VM time."""
    workload = pingpong_workload(tmp_path)
    (tmp_path / "spr-2s-1llc.yaml").write_text(ONE_LLC)
    two = run_pingpong(tmp_path, "spr-2s-2llc", workload, "--kernel", "v6.12")
    one = run_pingpong(tmp_path, str(tmp_path / "spr-2s-1llc.yaml"), workload, "--kernel", "v6.12")
    assert two["kernel"]["guest_release"].startswith("6.12.") and one["kernel"]["guest_release"].startswith("6.12.")
    two_share, two_w = half_node_share(two)
    one_share, _ = half_node_share(one)
    print(f"6.12 half-node share of wakeups: two LLCs a node {two_share:.3f}, one LLC a node {one_share:.3f}")
    assert two_share >= TWO_LLC_MIN, two_w["workload"]
    assert two_share - one_share >= MARGIN, (two_share, one_share)

    out = tmp_path / "memoryless"
    proc = numalab("run", "--kernel", "v6.12", "--topology", "memoryless-3", "--workload", "numa01", "--duration", "3",
                   "--numa-balancing", "on", "--out", str(out), "--json", "--timeout", "240", timeout=300)  # fmt: skip
    m = json.loads(proc.stdout) if proc.stdout.strip() else {}
    assert proc.returncode == 0 and m.get("status") == "ok", proc.stderr[-3000:]
    assert m["guest_topology"]["readback"]["nodes"]["1"]["memtotal_mib"] == 0
    vm = m["metrics"]["vmstat"]
    assert vm["numa_hint_faults"] > 0 and vm["numa_pages_migrated"] > 0, vm
    events = m["metrics"]["events"]
    assert events["mm_migrate_pages"] > 0, events
    assert all(f"sched_{k}_numa" in events for k in ("move", "swap", "stick")), events
    assert (out / "trace.dat").stat().st_size > 0

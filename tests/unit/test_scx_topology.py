"""The machine an scx scheduler says it built, read from its output and set against numalab's (issue 68;
lab.analysis.scx_topology). The lines are the 1.1.x schedulers' format strings with their loggers' prefixes; the
real runs are tests/scx (make test-scx) and docs/sched-ext.md's."""

from __future__ import annotations

from pathlib import Path

from lab.analysis.scx_topology import mask_cpus, read_view, scheduler_topology, summary_words
from lab.run.summary import _scheduler
from lab.topology.model.spec import load_topology

# scx_bpfland 1.1.4's first lines on genoa-nps2 under v7.3-scx, as its scheduler.out has them (simplelog's colours)
BPFLAND = """11:03:11 \x1b[0m\x1b[34m[INFO] \x1b[0mNUMA nodes: 2
11:03:12 \x1b[0m\x1b[34m[INFO] \x1b[0mscx_bpfland 1.1.4 x86_64-unknown-linux-gnu SMT off
11:03:12 \x1b[0m\x1b[34m[INFO] \x1b[0mscheduler options: /scheduler/scx_bpfland
11:03:12 \x1b[0m\x1b[34m[INFO] \x1b[0mkernel features: arena_fetch_bitops=no prog_stream_fds=no
11:03:12 \x1b[0m\x1b[34m[INFO] \x1b[0mscheduler flags: 0x76
11:03:12 \x1b[0m\x1b[34m[INFO] \x1b[0mprimary CPU domain = 0xff
11:03:12 \x1b[0m\x1b[34m[INFO] \x1b[0mcpufreq performance level: max
"""
RUSTY = """10:21:07 [INFO] Running scx_rusty (build ID: 1.1.4 x86_64-unknown-linux-gnu)
10:21:07 [INFO] NODE[00] mask= 0f
10:21:07 [INFO]  DOM[00] mask= 03
10:21:07 [INFO]  DOM[01] mask= 0c
10:21:07 [INFO] NODE[01] mask= f0
10:21:07 [INFO]  DOM[02] mask= 30
10:21:07 [INFO]  DOM[03] mask= c0
10:21:08 [INFO] Rusty scheduler started! Run `scx_rusty --monitor` for metrics.
"""
# scx_layered 1.1.4's two lines on mesh-9 under v7.3-scx (its tracing log's colours as they came)
LAYERED = (
    "\x1b[2m2026-11-29T11:45:59.518783Z\x1b[0m \x1b[32m INFO\x1b[0m ThreadId(01) "
    "\x1b[2mscx_layered\x1b[0m\x1b[2m:\x1b[0m \x1b[2msrc/main.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m2675:\x1b[0m "
    "Topology awareness not specified, selecting enabled based on hardware\n"
    "\x1b[2m2026-11-29T11:45:59.535051Z\x1b[0m \x1b[32m INFO\x1b[0m ThreadId(01) "
    "\x1b[2mscx_layered\x1b[0m\x1b[2m:\x1b[0m \x1b[2msrc/lib.rs\x1b[0m\x1b[2m:\x1b[0m\x1b[2m162:\x1b[0m "
    "CPUs: online/possible=9/9 nr_cores=9\n"
)


def test_a_mask_is_read_as_the_kernel_prints_one() -> None:
    assert mask_cpus("ff") == tuple(range(8))
    assert mask_cpus("3") == (0, 1)
    assert mask_cpus("c0") == (6, 7)
    assert mask_cpus("1,00000001") == (0, 32)
    assert mask_cpus("") is None and mask_cpus("x1") is None
    assert mask_cpus("f" * 2000) is None  # (wider than any guest: not read)


def test_bpfland_on_genoa_nps2_saw_the_machine() -> None:
    topo = load_topology("genoa-nps2")
    said = scheduler_topology(BPFLAND, topo)
    assert said is not None and said["agrees"], said
    assert said["seen"] == {"nodes": 2, "primary": "0-7", "smt": False}
    assert said["predicted"] == {"nodes": 2, "smt": False}
    assert said["lines"] == ["11:03:11 [INFO] NUMA nodes: 2",
                             "11:03:12 [INFO] scx_bpfland 1.1.4 x86_64-unknown-linux-gnu SMT off",
                             "11:03:12 [INFO] primary CPU domain = 0xff"]  # fmt: skip


def test_rusty_names_its_domains_and_they_are_the_llcs() -> None:
    topo = load_topology("genoa-nps2")  # two nodes of two LLCs of two CPUs
    said = scheduler_topology(RUSTY, topo)
    assert said is not None and said["agrees"], said["differences"]
    assert said["seen"] == {"node_cpus": ["0-3", "4-7"], "llc_cpus": ["0-1", "2-3", "4-5", "6-7"]}
    assert summary_words(said) == "; it saw the machine numalab built (nodes 2, LLCs 4)"
    # the same output on ring-2 (two nodes of one LLC of two CPUs): another machine, named part by part
    other = scheduler_topology(RUSTY, load_topology("ring-2"))
    assert other is not None and not other["agrees"]
    assert other["differences"] == ["nodes' CPUs: it saw 0-3 4-7, the machine has 0-1 2-3",
                                    "LLCs (its domains): it saw 0-1 2-3 4-5 6-7, the machine has 0-1 2-3"]  # fmt: skip


def test_a_scheduler_that_sees_another_machine_is_named() -> None:
    topo = load_topology("genoa-nps2")
    wrong = BPFLAND.replace("NUMA nodes: 2", "NUMA nodes: 1").replace("SMT off", "SMT on")
    said = scheduler_topology(wrong, topo)
    assert said is not None and not said["agrees"]
    assert said["differences"] == [
        "nodes with CPUs: it saw 1, the machine has 2",
        "SMT: it saw on, the machine has off",
    ]
    words = summary_words(said)
    assert words.startswith("; it saw another machine than the kernel's: nodes with CPUs: it saw 1"), words
    beyond = scheduler_topology(BPFLAND.replace("0xff", "0x1ff"), topo)
    assert beyond is not None and beyond["differences"] == ["primary domain: it holds CPUs 0-8, the machine has 0-7"]


def test_layered_counts_cpus_and_cores_and_p2dq_its_llcs() -> None:
    mesh9 = load_topology(str(Path(__file__).resolve().parents[1] / "data" / "scx" / "mesh-9.yaml"))
    said = scheduler_topology(LAYERED, mesh9)
    assert said is not None and said["agrees"] and said["seen"] == {"cpus": 9, "cores": 9, "several_llcs": True}
    topo = load_topology("genoa-nps2")
    other = scheduler_topology(LAYERED, topo)
    assert other is not None and other["differences"] == ["CPUs: it saw 9, the machine has 8",
                                                          "cores: it saw 9, the machine has 8"]  # fmt: skip
    single = "INFO Running scx_p2dq (build ID: 1.1.4)\nINFO Single LLC detected - disabling multi-LLC optimizations\n"
    p2dq = scheduler_topology(single, topo)
    assert p2dq is not None and p2dq["differences"] == ["LLCs: it saw one, the machine has several"]
    assert scheduler_topology("INFO Running scx_p2dq (build ID: 1.1.4)\n", topo)["agrees"]  # type: ignore[index]


def test_a_node_without_cpus_is_not_one_it_schedules_on() -> None:
    topo = load_topology("tiered-1s-far")  # a CPU node and a far memory node
    cpus = topo.total_cpus
    text = f"NODE[00] mask= {(1 << cpus) - 1:x}\nNODE[01] mask= 0\n DOM[00] mask= {(1 << cpus) - 1:x}\n"
    said = scheduler_topology(text, topo)
    assert said is not None and said["agrees"], said
    # scx_rusty 1.1.4 on tiered-2s-cxl under v7.3-scx: its two CPU-less memory nodes printed with empty masks
    real = (
        "NODE[00] mask= 3\n DOM[00] mask= 3\nNODE[01] mask= c\n DOM[01] mask= c\nNODE[02] mask= 0\nNODE[03] mask= 0\n"
    )
    said = scheduler_topology(real, load_topology("tiered-2s-cxl"))
    assert said is not None and said["agrees"] and said["seen"]["node_cpus"] == ["0-1", "2-3"], said


def test_a_scheduler_that_says_nothing_of_the_machine_has_no_record_of_it() -> None:
    assert scheduler_topology("", load_topology("ring-2")) is None
    assert scheduler_topology("scx_simple: started\nlocal=3 global=4\n", load_topology("ring-2")) is None
    assert not read_view("NUMA nodes: lots\nprimary CPU domain = 0xzz\n").said_anything
    assert summary_words(None) == ""


def test_the_run_summary_says_what_it_saw() -> None:
    said = scheduler_topology(BPFLAND, load_topology("genoa-nps2"))
    manifest = {"scheduler": {"kind": "sched_ext", "asked": "scx_bpfland@1.1.4", "start": {"ops": "bpfland_1.1.4"},
                              "ejected": False, "topology": said}}  # fmt: skip
    line = _scheduler(manifest)
    assert line == ("  scheduler scx_bpfland@1.1.4 (ops bpfland_1.1.4, enabled throughout; it saw the machine numalab "
                    "built (nodes 2, primary 0-7, SMT off))"), line  # fmt: skip

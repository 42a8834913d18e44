"""Sched groups of the NUMA domains: the 6.1 prediction, the guest's dump, the check, seed 002's bug."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab

from lab.analysis.node_cpu import node_cpu_time
from lab.analysis.sched_verbose import check_groups, groups_record, parse_dump, read_sched_groups
from lab.cpulist import parse_cpulist
from lab.errors import LabError
from lab.record_files import RUN_FORMAT
from lab.topology.model.spec import load_topology
from lab.topology.model.topology import Topology
from lab.topology.predictions.kernel_view import predict
from lab.topology.predictions.sched_groups import predict_groups
from lab.workloads.registry import get_workload

RUNS = Path(__file__).resolve().parents[1] / "data" / "runs"


def _sized(name: str, cpus_per_node: int) -> Topology:
    return load_topology(name).with_overrides(cpus_per_node, None, None)


def _nodes(topo: Topology, cpulist: str) -> tuple[int, ...]:
    node_cpus = topo.node_cpus()
    cpus = set(parse_cpulist(cpulist))
    return tuple(n for n, cs in enumerate(node_cpus) if cs and set(cs) <= cpus)


def _dump(topo: Topology, groups: dict[int, list[dict]], error: bool = False) -> str:
    """A sched_verbose dump as 6.1 prints it (NUMA levels only, after an MC level), with the KERN_ERR line the
    kernel prints inside the groups line when the first group is not the child domain."""
    out = []
    node_cpus = topo.node_cpus()
    node_of = {c: n for n, cs in enumerate(node_cpus) for c in cs}
    for cpu, doms in sorted(groups.items()):
        t = f"[    1.{cpu:06d}]"
        own = node_cpus[node_of[cpu]]
        out.append(f"{t} CPU{cpu} attaching sched-domain(s):")
        out.append(f"{t}  domain-0: span={own[0]}-{own[-1]} level=MC")
        out.append(f"{t}   groups: " + ", ".join(f"{c}:{{ span={c} }}" for c in own))
        child = f"{own[0]}-{own[-1]}"
        for i, d in enumerate(doms, start=1):
            pad = " " * (i + 1)
            out.append(f"{t}{pad}domain-{i}: span={d['span']} level=NUMA")
            pieces = zip(d["groups"], d["masks"])
            first, *rest = [f"{parse_cpulist(m)[0]}:{{ span={g} mask={m} cap=2048" for g, m in pieces]
            if error and d["groups"][0] != child:
                out.append(f"{t}{pad} groups: {first}")
                out.append(f"{t} ERROR: domain->groups does not match domain->child")
                out.append(f"{t}  }}, " + " }, ".join(rest) + " }")
            else:
                out.append(f"{t}{pad} groups: " + " }, ".join([first, *rest]) + " }")
            child = d["span"]
    out.append("[    1.900000] root domain span: 0-7 (max cpu_capacity = 1024)")
    return "\n".join(out) + "\n"


def test_prediction_matches_a_real_6_1_dump() -> None:
    """tests/data/runs holds real ring-4 runs (2 CPUs a node): the guest's groups are the prediction."""
    topo = load_topology("ring-4")
    for run in sorted(RUNS.glob("ring4-*")):
        guest = read_sched_groups(run)
        assert sorted(guest) == list(range(8))
        assert check_groups(topo, guest) == []
        numa = [d for d in guest[2] if d["level"] == "NUMA"]
        assert [d["groups"] for d in numa] == [["2-3", "4-5", "0-1"], ["0-5", "0-1,4-7"]]
        assert [d["masks"] for d in numa][1] == ["2-3", "6-7"]


@pytest.mark.parametrize("cpus_per_node", [1, 2])
def test_ring4_groups_as_seed_002_describes(cpus_per_node: int) -> None:
    """Seed 002: from one CPU's view the last level is (3,0,1)(1,2,3) for everyone; from each CPU's own view
    nodes 0 and 2 keep those groups and nodes 1 and 3 get (0,1,2)(2,3,0)."""
    topo = _sized("ring-4", cpus_per_node)
    node_cpus = topo.node_cpus()

    def last(construction: str, node: int) -> list[set[int]]:
        doms = predict_groups(topo, construction)[node_cpus[node][0]]
        return [set(_nodes(topo, g)) for g in doms[-1]["groups"]]

    for node in range(4):
        assert sorted(map(sorted, last("first-cpu", node))) == [[0, 1, 3], [1, 2, 3]]
    assert last("6.1", 0) == [{3, 0, 1}, {1, 2, 3}]
    assert last("6.1", 2) == [{1, 2, 3}, {3, 0, 1}]
    assert last("6.1", 1) == [{0, 1, 2}, {2, 3, 0}]
    assert last("6.1", 3) == [{2, 3, 0}, {0, 1, 2}]
    # 6.1: every CPU is in exactly one group of each domain, its own child domain first
    for cpu, doms in predict_groups(topo).items():
        for d in doms:
            assert sum(cpu in parse_cpulist(g) for g in d["groups"]) == 1


def test_first_cpu_construction_is_caught_with_the_overlap_named() -> None:
    topo = _sized("ring-4", 1)
    guest = parse_dump(_dump(topo, predict_groups(topo, "first-cpu"), error=True))
    assert guest[1][-1]["errors"] == ["domain->groups does not match domain->child"]
    assert guest[1][-1]["groups"] == ["0-1,3", "1-3"]
    problems = check_groups(topo, guest)
    assert [p.split()[1] for p in problems] == ["1", "3"]  # nodes 0 and 2 keep their groups
    assert problems[0] == (
        "cpu 1 NUMA domain-2 (span 0-3): sched groups {0-1,3} {1-3} != predicted {0-2} {0,2-3}: "
        "CPU 1 is in 2 groups, which overlap on CPUs 1,3 (nodes 1,3); "
        "kernel: domain->groups does not match domain->child"
    )
    # and the correct construction, printed the same way, passes
    assert check_groups(topo, parse_dump(_dump(topo, predict_groups(topo), error=True))) == []


def test_grid_2x4_first_cpu_construction_is_caught() -> None:
    topo = load_topology("grid-2x4")
    problems = check_groups(topo, parse_dump(_dump(topo, predict_groups(topo, "first-cpu"))))
    assert problems
    assert any("groups, which overlap on CPUs" in p for p in problems)


def test_a_partial_or_missing_dump_checks_what_is_there() -> None:
    topo = _sized("ring-4", 1)
    text = _dump(topo, {c: d for c, d in predict_groups(topo).items() if c < 2})
    guest = parse_dump(text)
    assert sorted(guest) == [0, 1]
    assert check_groups(topo, guest) == []
    rec = groups_record(topo, guest)
    assert rec["checked"] and rec["unchecked_cpus"] == [2, 3]
    assert check_groups(topo, {}) == [] and groups_record(topo, {})["checked"] is False


def test_a_rebuild_replaces_a_cpus_earlier_dump() -> None:
    topo = _sized("ring-4", 1)
    bad = _dump(topo, predict_groups(topo, "first-cpu"))
    good = _dump(topo, predict_groups(topo))
    text = bad + "[    2.0] CPU1 attaching NULL sched-domain.\n" + good
    assert check_groups(topo, parse_dump(text)) == []


def test_kernel_view_and_topo_show_have_the_groups() -> None:
    view = predict(load_topology("ring-4"))
    row = next(r for r in view["sched_groups"] if r["node"] == 1 and r["level"] == 2)
    assert row["group_nodes"] == [[0, 1, 2], [0, 2, 3]]
    proc = numalab("topo", "show", "ring-4")
    assert proc.returncode == 0, proc.stderr
    assert "node 1 level 2 (distance 30): nodes (0,1,2) (0,2,3)  cpus {0-5} {0-1,4-7}" in proc.stdout


def test_nodes13_workload_needs_nodes_1_and_3() -> None:
    w = get_workload("nodes13")
    cmd = w.command(load_topology("ring-4"), 5)
    assert cmd == "nodes13 --duration 5 --a-cpu 2 --b-cpu 6 --width 2 --tasks 8"
    with pytest.raises(LabError, match="nodes13.*nodes 1 and 3"):
        w.command(load_topology("ring-2"), 5)


def test_node_cpu_time_from_proc_stat(tmp_path) -> None:
    topo = _sized("ring-4", 1)
    head = "cpu  0 0 0 0 0 0 0 0 0 0\n"
    start = head + "".join(f"cpu{c} 100 0 50 1000 0 0 0 0 0 0\n" for c in range(4))
    busy = {0: 10, 1: 500, 2: 20, 3: 0}
    end = head + "".join(f"cpu{c} {100 + busy[c]} 0 50 {1000 + 500 - busy[c]} 0 0 0 0 0 0\n" for c in range(4))
    (tmp_path / "stat.start").write_text(start + "intr 1 2 3\n")
    (tmp_path / "stat.end").write_text(end)
    got = node_cpu_time(tmp_path, topo)
    assert got["busy_s"] == {"0": 0.1, "1": 5.0, "2": 0.2, "3": 0.0}
    assert got["busy_pct"]["1"] == 100.0 and got["busy_pct"]["3"] == 0.0
    assert (got["busiest_node"], got["idlest_node"]) == (1, 3)
    assert node_cpu_time(tmp_path / "missing", topo) == {}


def _manifest(d: Path, kernel: str, status: str, balance: float, busy1: float, busy3: float, problems: list) -> None:
    d.mkdir(parents=True)
    m = {
        "format": RUN_FORMAT,
        "status": status,
        "reason": problems[0] if problems else "ok",
        "topology": {"name": "ring-4", "total_cpus": 4},
        "kernel": {"name": kernel},
        "accelerator": {"name": "tcg"},
        "workload": {"name": "nodes13", "duration_s": 8, "result": {"balance_pct": balance}},
        "guest_topology": {"problems": problems, "sched_groups": {"checked": True}},
        "metrics": {"node_cpu": {"busy_s": {"1": busy1, "3": busy3}}},
    }
    (d / "manifest.json").write_text(json.dumps(m))


def test_seed002_report_verdicts(tmp_path) -> None:
    from lab.seeds.seed002 import groups_report as seed002

    bad = ["cpu 1 NUMA domain-1 (span 0-3): sched groups {0-1,3} {1-3} != predicted {0-2} {0,2-3}: ..."]
    for i, (b, n) in enumerate([(95.0, 2.0), (90.0, 1.0), (97.0, 3.5)]):
        _manifest(tmp_path / "m" / "runs" / f"base{i}", "baseline", "ok", b, 5.0, 5.0 * b / 100, [])
        _manifest(tmp_path / "m" / "runs" / f"bad{i}", "seed002", "topology-mismatch", n, 5.0, 0.1, bad)
    out = tmp_path / "r.md"
    assert seed002.main([str(tmp_path / "m"), "--out", str(out), "--json", str(tmp_path / "r.json")]) == 0
    summary = json.loads((tmp_path / "r.json").read_text())["summary"][0]
    assert summary["group_check_verdict"] == "reproduced"
    assert summary["imbalance_verdict"] == "reproduced" and summary["balance"]["ci_overlap"] is True
    text = out.read_text()
    assert "| ring-4 | 4 | 3/3 pass, 0 fail | 0/3 pass, 3 fail | reproduced |" in text
    assert bad[0] in text


def test_seed002_report_bad_input_is_one_line(tmp_path, capsys) -> None:
    from lab.seeds.seed002 import groups_report as seed002

    assert seed002.main([str(tmp_path), "--out", str(tmp_path / "r.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("numalab: error: ") and str(tmp_path) in err[0]
    assert not (tmp_path / "r.md").exists()
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "manifest.json").write_text("{}")
    assert seed002.main([str(tmp_path / "x"), "--out", str(tmp_path / "r.md")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "x/manifest.json: not a numalab run manifest" in err[0]


REAL = sorted((Path(__file__).resolve().parents[1] / "data" / "sched_verbose").glob("*.dmesg"))


@pytest.mark.parametrize("dump", REAL, ids=[p.stem for p in REAL])
def test_real_dumps_are_the_prediction(dump: Path) -> None:
    """Real guests (tests/data/sched_verbose): the baseline built 6.1's groups, the seed002 kernel the old ones."""
    from lab.topology.model.spec import load_spec

    meta = json.loads(dump.with_suffix(".json").read_text())
    topo = load_spec(meta["topology"], str(dump))
    guest = parse_dump(dump.read_text())
    assert sorted(guest) == list(range(topo.total_cpus))
    construction = "first-cpu" if dump.stem.endswith(".seed002") else "6.1"
    want = predict_groups(topo, construction)
    got = {c: [(d["span"], d["groups"], d["masks"]) for d in doms if d["level"] == "NUMA"] for c, doms in guest.items()}
    assert got == {c: [(d["span"], d["groups"], d["masks"]) for d in doms] for c, doms in want.items()}
    assert bool(check_groups(topo, guest)) == (construction == "first-cpu")


def test_real_dumps_cover_the_interesting_shapes() -> None:
    names = {p.stem for p in REAL}
    assert {"grid-2x4.baseline", "grid-2x4.seed002", "ring-4-c1.seed002", "line-4.baseline"} <= names

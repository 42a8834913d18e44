"""lab.topology: spec parsing, validation and the kernel-view oracle (no VMs)."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from lab.cpulist import parse_cpulist
from lab.errors import LabError
from lab.topology.model.spec import load_spec, load_topology, parse_mib, preset_names
from lab.topology.model.topology import RECLAIM_DISTANCE, Topology, validate
from lab.topology.predictions.kernel_view import (
    NUMA_BACKPLANE,
    NUMA_DIRECT,
    NUMA_GLUELESS_MESH,
    expected_numa_spans,
    predict,
    topology_type,
)

PRESETS = preset_names()

RING4_LINKS = [[0, 1], [1, 2], [2, 3], [3, 0]]
GRID2X4_LINKS = [[0, 1], [1, 2], [2, 3], [4, 5], [5, 6], [6, 7], [0, 4], [1, 5], [2, 6], [3, 7]]

# Worked out by hand from the pictures: 0-1-2-3-0, and a 2x4 grid whose hop
# count is the Manhattan distance between (row, column) positions.
RING4_MATRIX = [
    [10, 20, 30, 20],
    [20, 10, 20, 30],
    [30, 20, 10, 20],
    [20, 30, 20, 10],
]
GRID2X4_MATRIX = [
    [10, 20, 30, 40, 20, 30, 40, 50],
    [20, 10, 20, 30, 30, 20, 30, 40],
    [30, 20, 10, 20, 40, 30, 20, 30],
    [40, 30, 20, 10, 50, 40, 30, 20],
    [20, 30, 40, 50, 10, 20, 30, 40],
    [30, 20, 30, 40, 20, 10, 20, 30],
    [40, 30, 20, 30, 30, 20, 10, 20],
    [50, 40, 30, 20, 40, 30, 20, 10],
]


def spec(**fields) -> dict:
    """A valid 3-node, fully connected spec with ``fields`` replaced (None deletes)."""
    base = {
        "name": "t",
        "nodes": 3,
        "cpus_per_node": 2,
        "memory_per_node": "256M",
        "distances": [[10, 20, 20], [20, 10, 20], [20, 20, 10]],
    }
    base.update(fields)
    return {k: v for k, v in base.items() if v is not None}


def matrix(topo: Topology) -> list[list[int]]:
    return [list(row) for row in topo.distances]


def distinct(topo: Topology) -> set[int]:
    cpu = topo.cpu_nodes
    return {topo.distances[i][j] for i in cpu for j in cpu}


# --- presets ------------------------------------------------------------------


def test_the_documented_presets_exist():
    expected = {"grid-2x4", "mesh-2", "mesh-4", "mesh-8", "ring-2", "ring-4", "ring-8", "seed000-4node"}
    assert expected <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_is_a_valid_symmetric_slit(name):
    topo = load_topology(name)
    validate(topo)
    assert topo.name == name
    assert topo.source.endswith(f"{name}.yaml")
    assert topo.description
    # (gnr-2s-snc3 is the machine of commit 4d6dd05d07d0, whose SLIT is asymmetric across its sockets)
    assert topo.is_symmetric() == (name != "gnr-2s-snc3")
    assert topo.total_cpus == sum(len(c) for c in topo.node_cpus())
    # (memoryless-3's node 1 is memoryless on purpose; every other node of every preset has memory)
    assert [n.id for n in topo.nodes if n.memory_mib == 0] == ([1] if name == "memoryless-3" else [])


# (the presets that give their SLIT explicitly have no links to agree with; at least the ring and mesh ones do)
LINKED = [name for name in PRESETS if load_topology(name).hops() is not None]


@pytest.mark.parametrize("name", LINKED)
def test_preset_links_and_distances_agree(name):
    """Presets built from links: more hops is always further."""
    assert len(LINKED) >= 6 and {"ring-4", "mesh-8"} <= set(LINKED)
    topo = load_topology(name)
    hops = topo.hops()
    n = topo.n_nodes
    for i in range(n):
        for j in range(n):
            for k in range(n):
                if hops[i][j] < hops[i][k]:
                    assert topo.distances[i][j] < topo.distances[i][k]


# --- sizes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, mib",
    [("512M", 512), ("1G", 1024), (2048, 2048), ("1.5G", 1536), ("1024K", 1), ("2048", 2048), ("1T", 1024 * 1024)],
)
def test_sizes_in_whole_mib(value, mib):
    assert parse_mib(value, "memory_per_node") == mib


@pytest.mark.parametrize(
    "value, why",
    [
        ("1000K", "whole number of MiB"),
        ("0.5M", "whole number of MiB"),
        (0, "positive"),
        ("0M", "positive"),
        ("lots", "size"),
        (True, "size"),
        ("9" * 400 + "G", "too large"),
    ],
)
def test_bad_sizes_are_rejected_naming_the_field(value, why):
    with pytest.raises(LabError) as err:
        parse_mib(value, "memory_per_node")
    assert str(err.value).startswith("memory_per_node:")
    assert why in str(err.value)


# --- node lists -----------------------------------------------------------------


def test_node_list_with_ids_in_any_order():
    topo = load_spec(
        spec(
            nodes=[
                {"id": 2, "cpus": 0, "memory": "1G"},
                {"id": 0, "cpus": 4},
                {"id": 1, "cpus": 2, "memory": 768},
            ],
            cpus_per_node=None,
            memory_per_node="512M",
        ),
        "test",
    )
    assert [(n.id, n.cpus, n.memory_mib) for n in topo.nodes] == [(0, 4, 512), (1, 2, 768), (2, 0, 1024)]
    assert topo.cpu_nodes == [0, 1]
    assert topo.node_cpus() == [[0, 1, 2, 3], [4, 5], []]


# --- distances from link rules and entries -------------------------------------------


@pytest.mark.parametrize(
    "links, rule, expected",
    [
        (RING4_LINKS, {"per_hop": 10}, RING4_MATRIX),
        (RING4_LINKS, {"hops": {1: 20, 2: 30}}, RING4_MATRIX),
        (
            RING4_LINKS,
            {"hops": {1: 15, 2: 40}},
            [[10, 15, 40, 15], [15, 10, 15, 40], [40, 15, 10, 15], [15, 40, 15, 10]],
        ),
        (GRID2X4_LINKS, {"per_hop": 10}, GRID2X4_MATRIX),
        (GRID2X4_LINKS, {"hops": {1: 20, 2: 30, 3: 40, 4: 50}}, GRID2X4_MATRIX),
    ],
    ids=["ring4-per-hop", "ring4-hops", "ring4-uneven-hops", "grid-per-hop", "grid-hops"],
)
def test_link_rules_give_the_hand_computed_matrix(links, rule, expected):
    n = len(expected)
    topo = load_spec(spec(nodes=n, links=links, distance=rule, distances=None), "test")
    assert matrix(topo) == expected


@pytest.mark.parametrize("name, expected", [("ring-4", RING4_MATRIX), ("grid-2x4", GRID2X4_MATRIX)])
def test_presets_match_the_hand_computed_matrix(name, expected):
    assert matrix(load_topology(name)) == expected


def test_one_way_entries_are_mirrored_when_symmetric():
    topo = load_spec(
        spec(
            distances=[
                {"src": 0, "dst": 1, "value": 21},
                {"src": 2, "dst": 0, "value": 31},
                {"src": 1, "dst": 2, "value": 41},
                {"src": 2, "dst": 1, "value": 41},  # both ways, agreeing: still symmetric
            ]
        ),
        "test",
    )
    assert matrix(topo) == [[10, 21, 31], [21, 10, 41], [31, 41, 10]]


def test_an_asymmetric_slit_given_in_full_is_kept():
    entries = [{"src": i, "dst": j, "value": 20 + 10 * i + j} for i in range(3) for j in range(3) if i != j]
    topo = load_spec(spec(distances=entries), "test")
    assert not topo.is_symmetric()
    assert all(topo.distances[e["src"]][e["dst"]] == e["value"] for e in entries)


# --- overrides ------------------------------------------------------------------------


CPULESS = {
    "nodes": [{"id": 0, "cpus": 2, "memory": "512M"}, {"id": 1, "cpus": 2, "memory": "512M"}, {"id": 2, "cpus": 0}],
    "memory_per_node": "256M",
    "cpus_per_node": None,
}


def test_overrides_keep_cpuless_nodes_cpuless():
    topo = load_spec(spec(**CPULESS), "test")
    big = topo.with_overrides(cpus_per_node=4, mem_per_node_mib=1024, threads=2)
    assert [n.cpus for n in big.nodes] == [4, 4, 0]
    assert [n.memory_mib for n in big.nodes] == [1024, 1024, 1024]
    assert big.threads == 2
    assert big.distances == topo.distances
    assert [n.cpus for n in topo.nodes] == [2, 2, 0]  # the original is untouched


def test_overrides_are_validated():
    topo = load_spec(spec(), "test")
    with pytest.raises(LabError, match="threads"):
        topo.with_overrides(cpus_per_node=3, threads=2)
    with pytest.raises(LabError, match="cpus"):
        topo.with_overrides(cpus_per_node=0)


# --- validation errors -------------------------------------------------------------------


def _entries(pairs: dict[tuple[int, int], int]) -> list[dict]:
    return [{"src": s, "dst": d, "value": v} for (s, d), v in pairs.items()]


def _ring(n: int) -> list[list[int]]:
    return [[i, (i + 1) % n] for i in range(n)]


INVALID = {
    "remote-10": (
        spec(distances=[[10, 10, 20], [10, 10, 20], [20, 20, 10]]),
        ["distances[0][1]", "discards the whole SLIT"],
    ),
    "distance-256": (spec(distances=[[10, 20, 256], [20, 10, 20], [256, 20, 10]]), ["distances[0][2]", "256"]),
    "diagonal": (spec(distances=[[10, 20, 20], [20, 20, 20], [20, 20, 10]]), ["distances[1][1]", "local"]),
    "missing-id": (
        spec(nodes=[{"id": 0}, {"id": 1}, {"id": 3}]),
        ["nodes", "node id 2 is missing"],
    ),
    "duplicated-id": (
        spec(nodes=[{"id": 0}, {"id": 1}, {"id": 1}]),
        ["nodes", "node id 1 is duplicated"],
    ),
    "asymmetric-in-part": (
        spec(distances=_entries({(0, 1): 20, (1, 0): 30, (0, 2): 20, (1, 2): 20, (2, 1): 20})),
        ["distances", "2->0", "asymmetric"],
    ),
    "conflicting-entries": (
        spec(distances=_entries({(0, 1): 20, (0, 2): 20, (1, 2): 20}) + _entries({(0, 1): 30})),
        ["distances[3]", "0->1"],
    ),
    "zero-memory": (  # (memory 0 on a node with CPUs is a memoryless node; without CPUs it is nothing)
        spec(nodes=[{"id": 0}, {"id": 1, "cpus": 0, "memory": 0}, {"id": 2}]),
        ["nodes[1]", "needs CPUs or memory"],
    ),
    "memory-negative": (spec(nodes=[{"id": 0}, {"id": 1, "memory": -5}, {"id": 2}]), ["nodes[1].memory"]),
    "not-whole-mib": (spec(memory_per_node="0.5M"), ["memory_per_node", "whole number of MiB"]),
    "threads": (spec(cpus_per_node=3, threads=2), ["nodes[0].cpus", "threads=2"]),
    "total-cpus": (spec(total_cpus=7), ["total_cpus", "7", "6"]),
    "too-many-nodes": (
        spec(nodes=129, links=_ring(129), distance={"per_hop": 1}, distances=None),
        ["nodes", "129", "128"],
    ),
    "absurd-node-count": (spec(nodes=10**6), ["nodes: must be from 1 to 128, got 1000000"]),
    "unknown-field": (spec(memory="1G"), ["memory: unknown field"]),
    "unknown-node-field": (spec(nodes=[{"id": 0}, {"id": 1, "mem": "1G"}, {"id": 2}]), ["nodes[1].mem"]),
    "unreachable": (
        spec(nodes=4, links=[[0, 1], [2, 3]], distance={"per_hop": 10}, distances=None),
        ["links", "cannot be reached"],
    ),
    "hop-missing": (
        spec(nodes=4, links=[[0, 1], [1, 2], [2, 3]], distance={"hops": {1: 20, 2: 30}}, distances=None),
        ["distance.hops", "3 hops"],
    ),
    "rule-without-links": (spec(distance={"per_hop": 10}, distances=None), ["links"]),
    "rule-and-matrix": (spec(links=[[0, 1], [1, 2]], distance={"per_hop": 10}), ["distances", "exactly one"]),
    "wrong-size-matrix": (spec(distances=[[10, 20], [20, 10]]), ["distances", "3x3"]),
    "no-cpus": (spec(cpus_per_node=0), ["cpus", "at least one node"]),
}


@pytest.mark.parametrize("case", INVALID)
def test_invalid_specs_name_the_field(case):
    data, needles = INVALID[case]
    with pytest.raises(LabError) as err:
        load_spec(data, "spec.yaml")
    message = str(err.value)
    assert message.startswith("spec.yaml: ")
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_128_nodes_is_the_limit():
    ok = load_spec(spec(nodes=128, links=_ring(128), distance={"per_hop": 1}, distances=None), "test")
    assert ok.n_nodes == 128
    # The list form reaches validate() with 129 nodes.
    listed = spec(nodes=[{"id": i} for i in range(129)], links=_ring(129), distance={"per_hop": 1}, distances=None)
    with pytest.raises(LabError, match="nodes: 129 nodes given, at most 128"):
        load_spec(listed, "test")


# --- the kernel's view ----------------------------------------------------------------------


EXPECTED_TYPE = {
    "mesh-2": NUMA_DIRECT,
    "mesh-4": NUMA_DIRECT,
    "mesh-8": NUMA_DIRECT,
    "ring-2": NUMA_DIRECT,
    "ring-4": NUMA_GLUELESS_MESH,
    "ring-8": NUMA_GLUELESS_MESH,
    "grid-2x4": NUMA_GLUELESS_MESH,
    "seed000-4node": NUMA_BACKPLANE,
}


@pytest.mark.parametrize("name", sorted(EXPECTED_TYPE))
def test_preset_topology_type(name):
    assert predict(load_topology(name))["type"] == EXPECTED_TYPE[name]


@pytest.mark.parametrize("name", PRESETS)
def test_one_level_per_distinct_distance(name):
    topo = load_topology(name)
    view = predict(topo)
    assert view["levels"] == len(distinct(topo))
    assert view["distinct_distances"] == sorted(distinct(topo))
    assert view["numa_levels"] == view["levels"] - 1
    assert view["levels_beyond_reclaim_distance"] == [d for d in sorted(distinct(topo)) if d > RECLAIM_DISTANCE]


@pytest.mark.parametrize("name, beyond", [("ring-4", []), ("ring-8", [40, 50]), ("seed000-4node", [40])])
def test_levels_beyond_reclaim_distance(name, beyond):
    view = predict(load_topology(name))
    assert view["levels_beyond_reclaim_distance"] == beyond
    for level in view["level_detail"]:
        assert level["wake_affine"] == (level["distance"] not in beyond)


@pytest.mark.parametrize("name", PRESETS)
def test_level_spans_are_the_nodes_within_the_level_distance(name):
    topo = load_topology(name)
    node_cpus = topo.node_cpus()
    for level in predict(topo)["level_detail"]:
        for i in topo.cpu_nodes:
            within = {j for j in topo.cpu_nodes if topo.distances[i][j] <= level["distance"]}
            assert set(level["span_nodes"][str(i)]) == within
            assert set(parse_cpulist(level["span_cpus"][str(i)])) == {c for j in within for c in node_cpus[j]}


def test_ring4_node0_first_numa_level_spans_its_neighbours():
    topo = load_topology("ring-4")
    level1 = predict(topo)["level_detail"][1]
    assert level1["distance"] == 20
    assert set(level1["span_nodes"]["0"]) == {0, 1, 3}
    node_cpus = topo.node_cpus()
    spans = expected_numa_spans(topo)
    assert set(spans) == set(range(topo.total_cpus))
    for cpu in node_cpus[0]:
        first, second = spans[cpu]  # NUMA levels at 20 and 30, both visible from node 0
        assert set(parse_cpulist(first)) == {c for j in (0, 1, 3) for c in node_cpus[j]}
        assert set(parse_cpulist(second)) == set(range(topo.total_cpus))


def test_expected_numa_spans_two_pairs():
    """seed000: from node 0 the 20 level is its pair, the 40 level everyone."""
    topo = load_topology("seed000-4node")
    node_cpus = topo.node_cpus()
    spans = expected_numa_spans(topo)
    for cpu in node_cpus[0]:
        assert [set(parse_cpulist(s)) for s in spans[cpu]] == [set(node_cpus[0] + node_cpus[1]), set(range(8))]


def test_expected_numa_spans_skip_degenerate_levels():
    """A star: the centre sees every node at 20, so its 30 level repeats its 20 level and is not built."""
    star = spec(nodes=4, cpus_per_node=1, links=[[0, 1], [0, 2], [0, 3]], distance={"per_hop": 10}, distances=None)
    topo = load_spec(star, "t")
    assert predict(topo)["distinct_distances"] == [10, 20, 30]
    spans = expected_numa_spans(topo)
    assert [set(parse_cpulist(s)) for s in spans[0]] == [{0, 1, 2, 3}]
    assert [set(parse_cpulist(s)) for s in spans[1]] == [{0, 1}, {0, 1, 2, 3}]


def test_cpuless_node_makes_no_level():
    """Node 2 is the only node at 40; without CPUs it must not add a level (Linux >= 5.18)."""
    distances = [[10, 20, 40], [20, 10, 40], [40, 40, 10]]
    cpuless = load_spec(spec(**CPULESS, distances=distances), "t")
    view = predict(cpuless)
    assert view["cpuless_nodes"] == [2]
    assert 40 not in view["distinct_distances"]
    assert view["levels"] == 2
    assert all("2" not in lv["span_nodes"] for lv in view["level_detail"])
    # The control: the same SLIT with CPUs on node 2 does have a level at 40.
    with_cpus = load_spec(spec(distances=distances), "t")
    assert 40 in predict(with_cpus)["distinct_distances"]
    assert predict(with_cpus)["levels"] == 3


def test_cpuless_node_does_not_decide_the_type():
    """A ring 0-1-2-3 where only 0 and 2 (two hops apart) have CPUs: two levels, NUMA_DIRECT."""
    ring = load_spec(
        spec(
            nodes=[{"id": 0, "cpus": 1}, {"id": 1, "cpus": 0}, {"id": 2, "cpus": 1}, {"id": 3, "cpus": 0}],
            links=RING4_LINKS,
            distance={"per_hop": 10},
            distances=None,
        ),
        "t",
    )
    assert predict(ring)["distinct_distances"] == [10, 30]
    assert predict(ring)["type"] == NUMA_DIRECT


# --- topology_type against an independent implementation ------------------------------------------


def reference_type(d: list[list[int]], cpu_nodes: list[int]) -> str:
    """Linux 6.1 init_numa_topology_type(), rewritten from its description.

    At most two distance levels: NUMA_DIRECT. Otherwise take the first pair (a, b),
    scanning a then b over CPU nodes, that is at the maximum distance; if some CPU
    node c is closer than the maximum to both it is NUMA_GLUELESS_MESH, else
    NUMA_BACKPLANE.
    """
    levels = {d[i][j] for i in cpu_nodes for j in cpu_nodes}
    if len(levels) <= 2:
        return NUMA_DIRECT
    far = max(levels)
    a, b = next((a, b) for a in cpu_nodes for b in cpu_nodes if d[a][b] == far)
    if any(d[a][c] < far and d[b][c] < far for c in cpu_nodes):
        return NUMA_GLUELESS_MESH
    return NUMA_BACKPLANE


def random_case(seed: int) -> tuple[list[list[int]], list[int]]:
    """A valid symmetric SLIT on 2..8 nodes, a few distinct values, and a non-empty set of CPU nodes."""
    rng = random.Random(seed)
    n = rng.randint(2, 8)
    values = rng.sample([12, 15, 20, 25, 30, 40, 50, 255], rng.randint(1, 4))
    d = [[10] * n for _ in range(n)]
    for i in range(n):
        for j in range(i + 1, n):
            d[i][j] = d[j][i] = rng.choice(values)
    cpu_nodes = sorted(rng.sample(range(n), rng.randint(1, n))) if rng.random() < 0.3 else list(range(n))
    return d, cpu_nodes


CASES = range(200)


@pytest.mark.parametrize("seed", CASES)
def test_topology_type_matches_the_kernel_algorithm(seed):
    d, cpu_nodes = random_case(seed)
    expected = reference_type(d, cpu_nodes)
    levels = len({d[i][j] for i in cpu_nodes for j in cpu_nodes})
    assert topology_type(d, cpu_nodes, levels) == expected
    topo = load_spec(
        {
            "nodes": [{"id": i, "cpus": 1 if i in cpu_nodes else 0, "memory": "64M"} for i in range(len(d))],
            "distances": d,
        },
        "random",
    )
    view = predict(topo)
    assert view["type"] == expected
    assert view["levels"] == levels


def test_random_cases_cover_every_topology_type():
    """Otherwise the cross-check above would prove little."""
    counts = Counter(reference_type(*random_case(seed)) for seed in CASES)
    assert min(counts[k] for k in (NUMA_DIRECT, NUMA_GLUELESS_MESH, NUMA_BACKPLANE)) >= 10, counts


def test_reference_type_on_known_machines():
    """The reference itself, on the kernel comment's examples: a ring and two far pairs."""
    assert reference_type(RING4_MATRIX, [0, 1, 2, 3]) == NUMA_GLUELESS_MESH
    pairs = [[10, 20, 40, 40], [20, 10, 40, 40], [40, 40, 10, 20], [40, 40, 20, 10]]
    assert reference_type(pairs, [0, 1, 2, 3]) == NUMA_BACKPLANE
    assert reference_type([[10, 20], [20, 10]], [0, 1]) == NUMA_DIRECT


def test_a_parsed_spec_is_remembered_by_content(tmp_path, monkeypatch) -> None:
    """The second load of the same text does not parse YAML again; a changed text does."""
    import lab.datafile as yaml  # (the spec reader's YAML parser)

    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    spec = tmp_path / "two.yaml"
    spec.write_text(
        "name: two\nnodes: 2\ncpus_per_node: 1\nmemory_per_node: 256M\nlinks: [[0, 1]]\ndistance: {per_hop: 10}\n"
    )
    first = load_topology(str(spec))
    calls = []
    real = yaml.parse_yaml
    monkeypatch.setattr(yaml, "parse_yaml", lambda text, where: calls.append(text) or real(text, where))
    assert load_topology(str(spec)) == first and calls == []
    spec.write_text(spec.read_text().replace("cpus_per_node: 1", "cpus_per_node: 2"))
    assert load_topology(str(spec)).total_cpus == 4 and len(calls) == 1


def test_render_edges_are_the_links_or_each_nodes_nearest_pairs():
    from lab.topology.pictures.render import distance_grid, edge_label, edges

    asym = [[10, 20, 30], [20, 10, 20], [20, 20, 10]]
    # Node 2's nearest are 0 and 1 (its own row), though 2 is not node 0's nearest.
    assert edges(asym) == [(0, 1), (0, 2), (1, 2)]
    assert edges(asym, [[1, 0], [2, 1]]) == [(0, 1), (1, 2)]
    assert edge_label(asym, 0, 2) == "30/20" and edge_label(asym, 0, 1) == "20"
    assert edges(load_topology("ring-4").distances) == [(0, 1), (0, 3), (1, 2), (2, 3)]
    grid = distance_grid(asym)
    assert [c.value for c in grid[0]] == [10, 20, 30]
    assert grid[0][0].far is None and grid[0][1].far == 0.5 and grid[0][2].far == 1
    assert distance_grid([[10]])[0][0].far is None

"""The spec files' JSON Schemas (lab/schemas): valid JSON Schema, every shipped spec passes its own, their
bounds and choices are the code's, and a failure is one line naming the field path."""

from __future__ import annotations

import re
from pathlib import Path

import jsonschema
import pytest
from common import REPO, assert_one_line_error, numalab

from lab import schemas
from lab.analysis.compare import SIGNIFICANCES
from lab.analysis.expectations import DIRECTIONS
from lab.datafile import load_yaml
from lab.errors import LabError
from lab.guest.settings import KNOB_NAMES
from lab.run.options import MAX_REPEAT
from lab.topology.model.topology import MAX_NODES
from lab.vm.tcg.guest_clock import CLOCKS
from lab.vm.tcg.latency_model import REMOTE_LATENCY
from lab.workloads.output_readers import READERS
from lab.workloads.workload_type import RESULT_KEY

TOPOLOGIES = sorted((REPO / "topologies").glob("*.yaml")) + sorted(
    p for p in (REPO / "tests/data/topologies").glob("*.yaml")  # (the invalid ones are invalid beyond the schema)
    if p.name != "invalid-too-many-nodes.yaml" and p.name != "invalid-unknown-field.yaml"
)  # fmt: skip
MATRICES = sorted((REPO / "lab/matrix/examples").glob("*.yaml")) + sorted(
    p for p in (REPO / "lab/seeds").glob("*/*.yaml") if p.name != "seed.yaml"  # (seed.yaml: a seed's card)
) + [REPO / "tests/data/workloads/matrix.yaml", REPO / "tests/data/ci-rehearsal.yaml"]  # fmt: skip
WORKLOADS = [p for p in sorted((REPO / "tests/data/workloads").glob("*.yaml")) if p.name != "matrix.yaml"]


@pytest.mark.parametrize("kind", schemas.KINDS)
def test_each_schema_is_valid_draft_2020_12(kind: str) -> None:
    schema = schemas.load_schema(kind)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize(
    "kind, paths", [("topology", TOPOLOGIES), ("matrix", MATRICES), ("workload", WORKLOADS)], ids=schemas.KINDS
)
def test_every_shipped_spec_passes_its_schema(kind: str, paths: list[Path]) -> None:
    assert len(paths) >= 2
    for path in paths:
        schemas.check(load_yaml(path, kind), kind)


def test_the_rejected_test_specs_are_rejected_by_the_schema_itself() -> None:
    for name, field in (("invalid-too-many-nodes", "nodes"), ("invalid-unknown-field", "cpu_per_node")):
        data = load_yaml(REPO / f"tests/data/topologies/{name}.yaml", "topology")
        with pytest.raises(LabError, match=rf"^{field}: "):
            schemas.check(data, "topology")


def _at(schema: dict, *path: str) -> dict:
    node = schema
    for key in path:
        node = node[key]
        while "$ref" in node and len(node) <= 2:  # (a reference with at most a description beside it)
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def test_the_schemas_bounds_and_choices_are_the_codes() -> None:
    topo, matrix, work = (schemas.load_schema(k) for k in schemas.KINDS)
    assert _at(topo, "properties", "nodes")["anyOf"][0]["maximum"] == MAX_NODES
    setting = _at(matrix, "$defs", "setting", "properties")
    assert tuple(setting["knobs"]["properties"]) == KNOB_NAMES
    assert tuple(setting["clock"]["enum"]) == CLOCKS
    assert tuple(setting["remote_latency"]["enum"]) == REMOTE_LATENCY
    assert tuple(_at(matrix, "properties", "auto", "properties", "significance")["enum"]) == SIGNIFICANCES
    assert tuple(_at(matrix, "properties", "expect", "items", "properties", "direction")["enum"]) == DIRECTIONS
    assert _at(matrix, "properties", "repeats")["anyOf"][0]["maximum"] == MAX_REPEAT
    name = _at(work, "properties", "metrics", "items", "properties", "name")["pattern"]
    assert name == f"^{RESULT_KEY.pattern}$"
    readers = _at(work, "$defs", "builtin", "properties", "results", "properties", "reader")["enum"]
    assert tuple(readers) == tuple(READERS)


def test_a_definition_of_a_schema_is_checked_against_as_the_whole_is() -> None:
    """``check(data, kind, definition)``: against one of the schema's ``$defs`` (a built-in workload's file), its
    references into the rest of the schema resolved; an unknown one is a one-line error."""
    bad = {"description": "d", "command": "", "results": {"reader": "perf-bench-numa-mem"},
           "metrics": [{"name": "x", "label": "X", "higher_is_better": True}]}  # fmt: skip
    with pytest.raises(LabError, match="^command: expected the shell command the guest runs, got ''$"):
        schemas.check(bad, "workload", "builtin")
    assert schemas.check(bad | {"command": "x"}, "workload", "builtin")["command"] == "x"
    with pytest.raises(LabError, match="^schema workload: no definition 'plugin'$"):
        schemas.check({}, "workload", "plugin")


@pytest.mark.parametrize(
    "kind, data, message",
    [
        ("topology", {"nodes": [{"id": 0, "cpus": "two"}]}, "nodes[0].cpus: expected an integer, got 'two'"),
        ("topology", {"nodes": [{"id": 0}, {"cpus": 1}]}, "nodes[1].id: missing"),
        ("topology", {"nodes": 2, "distance": {"hops": {1: "far"}}}, "distance.hops.1: expected an integer, got 'far'"),
        ("topology", {"nodes": 2, "distance": {}}, "distance: expected {per_hop: N} or {hops: {1: D1, 2: D2, ...}}"),
        ("topology", ["nodes"], "expected a mapping at the top level, got a list"),
        ("topology", {"nodes": "4"}, "nodes: expected a node count or a non-empty list of nodes, got '4'"),
        ("matrix", {"topologies": ["ring-2"], "workloads": [{"name": "idle", "duration": 0}]},
         "workloads[0].duration: must be more than 0, got 0"),
        ("matrix", {"topologies": ["ring-2"], "workloads": ["idle"], "settings": [{"name": "a", "knobs": {"x": 1}}]},
         "settings[0].knobs.x: unknown field (known: scan_delay_ms, scan_period_min_ms,"),
        ("matrix", {"topologies": [], "workloads": ["idle"]}, "topologies: empty (give at least one)"),
        ("matrix", {"workloads": ["idle"]}, "topologies: missing"),
        ("workload", {"command": "x", "results": {"json-line": "R "}, "metrics": [{"name": "a"}]},
         "metrics[0].higher_is_better: missing"),
        ("workload", {"command": "x", "results": {"json-line": "R ", "regex": {}}, "metrics": []},
         "results: expected {json-line: PREFIX} or {regex: {metric: 'pattern with one group'}}"),
    ],
)  # fmt: skip
def test_a_failure_is_one_line_naming_the_path(kind: str, data: object, message: str) -> None:
    with pytest.raises(LabError) as err:
        schemas.check(data, kind)
    assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_the_cli_names_the_file_and_the_path(tmp_path: Path) -> None:
    spec = tmp_path / "x.yaml"
    spec.write_text("nodes: [{id: 0, cpus: 1, memory: 256M}, {id: 1, cpus: 1, memory: 256M}, {id: 2, cpus: x}]\n"
                    "distances: [[10, 20, 20], [20, 10, 20], [20, 20, 10]]\n")  # fmt: skip
    proc = numalab("topo", "check", str(spec))
    assert_one_line_error(proc, f"numalab: error: {spec}: nodes[2].cpus: expected an integer, got 'x'")
    assert proc.returncode == 2


def test_a_spec_in_the_parsed_spec_cache_passed_the_schema(tmp_path: Path, monkeypatch) -> None:
    """The cache keeps only specs that passed: a bad one is refused again, not read back unchecked."""
    from lab.topology.model.spec import load_topology

    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: 2\ncpus_per_node: one\nmemory_per_node: 256M\ndistances: [[10, 20], [20, 10]]\n")
    for _ in range(2):
        with pytest.raises(LabError, match=re.escape(f"{bad}: cpus_per_node: expected an integer, got 'one'")):
            load_topology(str(bad))
    assert list((tmp_path / "cache/specs").iterdir()) == []
    good = tmp_path / "good.yaml"
    good.write_text(bad.read_text().replace("one", "1"))
    assert load_topology(str(good)).total_cpus == load_topology(str(good)).total_cpus == 2
    assert len(list((tmp_path / "cache/specs").iterdir())) == 1


@pytest.mark.parametrize("command, kind", [("topo", "topology"), ("matrix", "matrix"), ("workload", "workload")])
def test_the_schema_commands_print_the_shipped_schema(command: str, kind: str) -> None:
    proc = numalab(command, "schema")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == schemas.schema_path(kind).read_text()

"""Property-based tests (hypothesis) of the readers of files a user hands numalab: topology specs, matrix
specs, run options and run records. Whatever goes in (arbitrary bytes, arbitrary structures, real files with
bytes changed), what comes out is a value or a one-line LabError: never another exception, and never a hang
(each example has a deadline)."""

from __future__ import annotations

import json
import math
import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from common import REPO
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lab.analysis.record import RunRecord
from lab.datafile import MAX_DEPTH, parse_json, parse_yaml
from lab.errors import LabError
from lab.matrix.definition import parse_matrix
from lab.run.options import RunOptions
from lab.topology.model.spec import load_spec

# Generous: the machine running the tests is shared; a hang is minutes, not seconds.
SETTINGS = settings(max_examples=150, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.too_slow])

PRESET = (REPO / "topologies" / "ring-4.yaml").read_bytes()
MATRIX = REPO / "lab" / "matrix" / "examples" / "ci-smoke.yaml"
RECORD = REPO / "tests" / "data" / "runs" / "ring4-numa01-on-1"
YAML_BITS = ["[", "]", "{", "}", ":", ", ", "- ", "\n", "  ", "&a ", "*a", "<<: ", "!!float ", ".nan", ".inf", "-.inf",
             "1e9", "99999999999999999999", "0x1f", "on", "~", "null", "'x'", '"y"', "nodes", "cpus_per_node",
             "distance", "per_hop", "links", "#", "|", ">", "? ", "---", "..."]  # fmt: skip


def _one_line(err: LabError) -> None:
    text = str(err)
    assert text and "\n" not in text and "Traceback" not in text


def _mutate(data: bytes, edits: list[tuple[int, int]]) -> bytes:
    out = bytearray(data)
    for pos, byte in edits:
        if out:
            out[pos % len(out)] = byte
    return bytes(out)


EDITS = st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)), min_size=1, max_size=8)
YAML_TEXT = st.lists(st.sampled_from(YAML_BITS) | st.text(max_size=4), max_size=60).map("".join)

# JSON-like values, with the floats JSON cannot hold (NaN, infinities) and deep or wide nesting now and then.
SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8),
                      inner, max_size=5), max_leaves=40)  # fmt: skip


def _finite(value: object) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


# --- the reader itself -------------------------------------------------------------------------------------


@SETTINGS
@given(st.binary(max_size=3000) | YAML_TEXT.map(str.encode))
def test_yaml_reader_returns_data_or_a_one_line_error(data: bytes) -> None:
    try:
        value = parse_yaml(data, "x.yaml")
    except LabError as err:
        _one_line(err)
        assert str(err).startswith("x.yaml: ")
        return
    assert _finite(value)
    json.dumps(value, default=str)  # (plain data: the parsed-spec cache dumps it, bounded)


@SETTINGS
@given(VALUES)
def test_json_reader_reads_back_what_is_finite_and_refuses_the_rest(value: object) -> None:
    text = json.dumps(value)  # (writes NaN and Infinity as Python does)
    try:
        back = parse_json(text, "x.json")
    except LabError as err:
        _one_line(err)
        assert not _finite(value) or "nested" in str(err)
        return
    assert _finite(value) and back == value


@SETTINGS
@given(st.binary(max_size=3000)
       | st.text(alphabet='[]{}:,"0123456789.eE-+ \nNaInfity\\u', max_size=400).map(str.encode))  # fmt: skip
def test_json_reader_on_arbitrary_bytes(data: bytes) -> None:
    try:
        parse_json(data, "x.json")
    except LabError as err:
        _one_line(err)


@SETTINGS
@given(st.integers(MAX_DEPTH + 1, 100_000), st.sampled_from(["[", '{"a":']))
def test_deep_json_is_refused_at_any_depth(depth: int, opener: str) -> None:
    closer = "]" if opener == "[" else "}"
    with pytest.raises(LabError, match="nested more than"):
        parse_json(opener * depth + "1" + closer * depth, "x.json")


@SETTINGS
@given(st.integers(2, 12), st.integers(2, 12))
def test_yaml_aliases_expand_within_bounds_or_are_refused(width: int, levels: int) -> None:
    names = [f"l{i}" for i in range(levels)]
    lines = [f"{names[0]}: &{names[0]} [" + ", ".join(["x"] * width) + "]"]
    for prev, name in zip(names, names[1:]):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * width) + "]")
    try:
        data = parse_yaml("\n".join(lines) + "\n", "bomb.yaml")
    except LabError as err:
        _one_line(err)
        assert width**levels > 100_000 or "nested" in str(err)
        return
    assert width**levels < 300_000 and len(json.dumps(data)) > 0


# --- the readers of each kind of file ----------------------------------------------------------------------


@SETTINGS
@given(st.binary(max_size=2000) | YAML_TEXT.map(str.encode) | EDITS.map(lambda e: _mutate(PRESET, e)))
def test_topology_spec_reader(data: bytes) -> None:
    try:
        topo = load_spec(parse_yaml(data, "t.yaml"), "t.yaml")
    except LabError as err:
        _one_line(err)
        return
    assert topo.n_nodes >= 1


@SETTINGS
@given(EDITS.map(lambda e: _mutate(MATRIX.read_bytes(), e)) | YAML_TEXT.map(str.encode)
       | st.dictionaries(st.sampled_from(["topologies", "kernels", "workloads", "settings", "repeats", "duration",
                                          "timeout", "auto", "baseline", "include"]), VALUES, max_size=6))  # fmt: skip
def test_matrix_spec_reader(data: bytes | dict) -> None:
    try:
        value = parse_yaml(data, "m.yaml") if isinstance(data, bytes) else data
        spec = parse_matrix(value, "m.yaml", "m")
    except LabError as err:
        _one_line(err)
        return
    assert 1 <= len(spec.runs) <= 10_000


FIELDS = [f for f in RunOptions.__dataclass_fields__]


@SETTINGS
@given(st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=6), VALUES, max_size=8)
       | st.fixed_dictionaries({}, optional={"duration": st.floats(), "timeout": st.floats() | st.none(),
                                             "repeat": st.integers(), "no_trace": st.booleans(),
                                             "events": st.lists(st.sampled_from(["sched:x", "bad", ""]), max_size=2),
                                             "trace_mode": st.sampled_from(["raw", "record", "x"]),
                                             "boot_deadline": st.floats() | st.none(),
                                             "knobs": st.lists(st.text(max_size=12), max_size=2)}))  # fmt: skip
def test_run_options_reader(data: dict) -> None:
    try:
        opts = RunOptions.from_dict(parse_json(json.dumps(data), "o.json"), "o.json")
    except LabError as err:
        _one_line(err)
        return
    assert math.isfinite(opts.duration) and opts.duration > 0 and 1 <= opts.repeat <= 1000
    assert not (opts.tracing.no_trace and opts.tracing.events)


@SETTINGS
@given(st.binary(max_size=2000) | st.text(alphabet='[]{},:"0123456789 ', max_size=300).map(str.encode))
def test_run_options_file_reader(data: bytes) -> None:
    try:
        RunOptions.from_dict(parse_json(data, "o.json"), "o.json")
    except LabError as err:
        _one_line(err)


@pytest.fixture(scope="module")
def record_copy(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rec") / "r"
    shutil.copytree(RECORD, d)
    return d


@settings(max_examples=150, deadline=timedelta(seconds=5),
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])  # fmt: skip
@given(EDITS.map(lambda e: _mutate((RECORD / "manifest.json").read_bytes(), e)) | st.binary(max_size=500)
       | VALUES.map(lambda v: json.dumps({"format": "numalab-run/1", "topology": v, "run_id": v, "status": "ok"})
                    .encode()))  # fmt: skip
def test_run_record_reader(record_copy: Path, manifest: bytes) -> None:
    (record_copy / "manifest.json").write_bytes(manifest)
    try:
        rec = RunRecord.load(record_copy)
    except LabError as err:
        _one_line(err)
        return
    assert rec.manifest["format"] == "numalab-run/1" and rec.topology.n_nodes >= 1

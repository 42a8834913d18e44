"""The built-in workloads are folders (lab/workloads/NAME/, lab.workloads.registry): adding one is adding a
folder, a broken one is a one-line error naming its file and field, and what a folder says is what runs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from common import REPO

from lab import schemas
from lab.datafile import load_yaml
from lab.errors import LabError
from lab.topology.model.spec import load_topology
from lab.workloads import registry, user_workload
from lab.workloads.output_readers import READERS, perf_numa_summary
from lab.workloads.registry import FOLDERS, WORKLOADS, discover

FOLDER_NAMES = sorted(p.name for p in FOLDERS.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))


def _copy(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "workloads"
    for name in names:
        shutil.copytree(FOLDERS / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_every_folder_is_a_workload_of_its_name() -> None:
    assert list(WORKLOADS) == FOLDER_NAMES and len(WORKLOADS) >= 23
    for name, w in WORKLOADS.items():
        assert w.folder == f"lab/workloads/{name}" and w.name == name


def test_a_folders_python_files_are_the_hooks_its_definition_names() -> None:
    for name in FOLDER_NAMES:
        data = load_yaml(FOLDERS / name / "workload.yaml")  # (the strict reader: no key given twice, ...)
        named = {data.get("scale"), (data.get("results") or {}).get("parse")} - {None}
        assert {p.name for p in (FOLDERS / name).glob("*.py")} == named, name
        assert {p.name for p in (FOLDERS / name).iterdir()} - {"__pycache__"} == named | {"workload.yaml"}, name


def test_the_definition_is_the_user_format_with_a_built_ins_extensions() -> None:
    """A built-in uses the user format's fields but files and packages, and adds programs and scale."""
    assert set(user_workload.KEYS) - set(registry.USER_ONLY) | {"programs", "scale"} == set(registry.KEYS)


def test_every_program_a_folder_names_is_built_by_images_workloads() -> None:
    makefile = (REPO / "images" / "workloads" / "Makefile").read_text()
    progs = set(re.search(r"^PROGS := (.*)$", makefile, re.MULTILINE).group(1).split())
    named = {p for w in WORKLOADS.values() for p in w.programs}
    assert named and named <= progs, named - progs
    for w in WORKLOADS.values():
        # a command starts the program or tool its folder names (a shell loop around it for the tools)
        first = w.command(load_topology("grid-2x4"), 5)
        assert any(re.search(rf"(^|do ){re.escape(p)} ", first) for p in (*w.programs, *w.tools)), (w.name, first)


def test_adding_a_folder_adds_a_workload(tmp_path) -> None:
    root = _copy(tmp_path, "idle", "pairs")
    new = root / "idle-twice"
    shutil.copytree(root / "idle", new)
    text = (new / "workload.yaml").read_text()
    (new / "workload.yaml").write_text(
        text.replace("command: idle --duration {duration}", "command: idle --duration {duration}; idle --duration 1")
    )
    workloads, tools = discover(root)
    assert list(workloads) == ["idle", "idle-twice", "pairs"] and tools == {}
    w = workloads["idle-twice"]
    assert w.command(load_topology("ring-2"), 2.5) == "idle --duration 2.5; idle --duration 1"
    assert w.metrics == WORKLOADS["idle"].metrics and w.kind == "lab" and w.programs == ("idle",)


def test_a_tool_folder_gives_its_tool_and_parser(tmp_path) -> None:
    workloads, tools = discover(_copy(tmp_path, "sysbench-threads", "perf-numa01", "perf-sched-pipe"))
    assert tools == {"perf": "/usr/bin/perf", "sysbench": "/usr/bin/sysbench"}
    w = workloads["sysbench-threads"]
    assert w.kind == "tool" and w.tools == ("sysbench",) and w.parse is not None
    assert w.command(load_topology("ring-4"), 2.6) == "sysbench threads --threads=16 --time=3 run"  # (8 CPUs)


def _broken(tmp_path: Path, name: str, old: str, new: str) -> str:
    root = _copy(tmp_path, name)
    path = root / name / "workload.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    with pytest.raises(LabError) as err:
        discover(root)
    assert "\n" not in str(err.value)
    return str(err.value)


@pytest.mark.parametrize(
    "old, new, why",
    [
        ("programs: [idle]", "files: [idle]", "files: a user's workload field; a built-in names programs"),
        ("programs: [idle]", "programs: [idle]\nname: sleeper", "name: 'sleeper', but a built-in is named after"),
        ("command: idle", "comand: idle", "comand: unknown field"),
        ('json-line: "NUMALAB_RESULT "', "regex: {elapsed_s: '([0-9]+)'}", "results: expected {json-line: PREFIX}, "),
        ('json-line: "NUMALAB_RESULT "', "reader: perf", "results.reader: expected one of perf-bench-numa-mem, got"),
        ("higher_is_better: false", "higher_is_better: no-thanks", "metrics[0].higher_is_better: missing or not"),
        ("scale: 1.0e-9", "scale: 1e-9", "metrics[1].twin.scale: expected a number > 0 (1.0e-9, not 1e-9"),
        ('label: "workload elapsed"', 'label: "workload elapsed", units: s', "metrics[0].units: unknown field"),
        ("programs: [idle]", "programs: [idle]\nscale: missing.py", "scale: expected the name of a .py file in idle/"),
    ],
)  # fmt: skip
def test_a_broken_folder_is_one_line_naming_its_file_and_field(tmp_path, old: str, new: str, why: str) -> None:
    text = _broken(tmp_path, "idle", old, new)
    assert text.startswith(f"workload file {tmp_path}/workloads/idle/workload.yaml: ") and why in text, text


def test_a_metric_declared_otherwise_by_another_folder_is_refused(tmp_path) -> None:
    root = _copy(tmp_path, "idle", "pairs")
    path = root / "pairs" / "workload.yaml"
    path.write_text(path.read_text().replace('label: "workload elapsed"', 'label: "time taken"'))
    with pytest.raises(LabError, match=r"pairs: metric elapsed_s is declared otherwise in .*/idle$"):
        discover(root)


def test_a_folder_without_its_definition_is_refused(tmp_path) -> None:
    root = _copy(tmp_path, "idle")
    (root / "stream").mkdir()
    with pytest.raises(LabError, match="stream: a built-in workload's folder has no workload.yaml"):
        discover(root)


def test_a_scale_hook_may_not_give_a_placeholder_every_command_has(tmp_path) -> None:
    root = _copy(tmp_path, "pairs")
    hook = root / "pairs" / "scale.py"
    hook.write_text(hook.read_text().replace('{"pairs":', '{"cpus": 1, "pairs":'))
    workloads, _ = discover(root)
    with pytest.raises(LabError, match=r"scale.py: gives \{cpus\}, which every command has already"):
        workloads["pairs"].command(load_topology("ring-2"), 1)


def test_the_fast_reader_reads_what_the_strict_one_does() -> None:
    """The folders are read by libyaml at every start; lab.datafile's strict reader (no key twice, no NaN,
    bounded) reads them the same."""
    assert registry.FAST_LOADER is not None  # (else numalab reads them with the strict one: slower, not wrong)
    for name in FOLDER_NAMES:
        assert registry.read_definition(FOLDERS / name) == load_yaml(FOLDERS / name / "workload.yaml"), name


def test_a_file_that_is_not_yaml_is_one_line(tmp_path) -> None:
    root = _copy(tmp_path, "idle")
    (root / "idle" / "workload.yaml").write_text("description: [idle\n")
    with pytest.raises(LabError, match=r"^workload file .*/idle/workload.yaml: not valid YAML at line 2$"):
        discover(root)


def test_every_built_in_passes_the_schema_users_files_are_checked_by() -> None:
    """The users' workload schema (lab/schemas/workload.schema.json) holds a built-in's file as its ``builtin``
    definition, whose shared fields are the user format's by reference: every folder's file passes it."""
    for name in FOLDER_NAMES:
        schemas.check(load_yaml(FOLDERS / name / "workload.yaml"), "workload", "builtin")
    with pytest.raises(LabError, match=r"^programs: unknown field \(known: name, description, command, files,"):
        schemas.check(load_yaml(FOLDERS / "idle" / "workload.yaml"), "workload")  # (a user's file has no programs)


@pytest.mark.parametrize(
    "name, old, new",
    [
        ("idle", "programs: [idle]", "files: [idle]"),
        ("idle", "programs: [idle]", "programs: idle"),
        ("idle", "command: idle", "comand: idle"),
        ("idle", "description: 'no work: boot and trace overhead only'", "description: ' '"),
        ("idle", 'json-line: "NUMALAB_RESULT "', "regex: {elapsed_s: '([0-9]+)'}"),
        ("idle", 'json-line: "NUMALAB_RESULT "', "reader: perf-bench-numa"),
        ("idle", 'json-line: "NUMALAB_RESULT "', 'json-line: "NUMALAB_RESULT "\n  reader: perf-bench-numa-mem'),
        ("idle", "higher_is_better: false", "higher_is_better: no-thanks"),
        ("idle", "scale: 1.0e-9", "scale: 1e-9"),
        ("idle", "scale: 1.0e-9", "scale: 0.0"),
        ("idle", 'label: "workload elapsed"', 'label: "workload elapsed", units: s'),
        ("idle", 'label: "workload elapsed", ', ""),
        ("idle", "mean: hmean", "mean: gmean"),
        ("sysbench-threads", "tools: [/usr/bin/sysbench]", "tools: [sysbench]"),
        ("sysbench-threads", "parse: parse.py", "parse: parse"),
    ],
)  # fmt: skip
def test_the_schema_and_the_folder_reader_refuse_the_same_mistakes(tmp_path, name: str, old: str, new: str) -> None:
    """numalab reads the folders at every start by hand (lab.workloads.registry: jsonschema's import alone would
    slow every command); the schema and that reader refuse the same mistakes, each in one line."""
    _broken(tmp_path, name, old, new)
    data = load_yaml(tmp_path / "workloads" / name / "workload.yaml")
    with pytest.raises(LabError) as err:
        schemas.check(data, "workload", "builtin")
    assert "\n" not in str(err.value)


def test_the_perf_numa_folders_name_one_reader() -> None:
    """perf bench numa mem's summary is read by one reader the five folders name, not by a parse.py each."""
    perf = [w for w in WORKLOADS.values() if w.name.startswith("perf-numa")]
    assert len(perf) == 5 and all(w.parse is perf_numa_summary and w.kind == "tool" for w in perf)
    assert READERS["perf-bench-numa-mem"] is perf_numa_summary
    assert not any((FOLDERS / w.name / "parse.py").exists() for w in perf)


def test_the_packages_modules_are_not_workloads_nor_the_other_way(tmp_path) -> None:
    """Modules and workload folders share lab/workloads/: a .py file or a Python package (a folder with
    __init__.py and no workload.yaml) is no workload, and a folder may not take a module's name (its hooks
    could not import each other by it)."""
    root = _copy(tmp_path, "idle")
    (root / "__init__.py").write_text("")
    (root / "scaling.py").write_text("")
    (root / "helpers").mkdir()
    (root / "helpers" / "__init__.py").write_text("")
    workloads, _ = discover(root)
    assert list(workloads) == ["idle"]
    shutil.copytree(root / "idle", root / "scaling")
    with pytest.raises(LabError, match=r"^workload file .*/scaling/workload.yaml: a workload folder may not have the"):
        discover(root)
    shutil.rmtree(root / "scaling")
    (root / "idle" / "__init__.py").write_text("")  # (a folder with its workload.yaml is a workload: not a package)
    with pytest.raises(LabError, match=r"^workload file .*/idle/workload.yaml: a workload folder is no Python package"):
        discover(root)
    assert {"registry", "scaling", "elf"} <= {p.stem for p in FOLDERS.glob("*.py")}  # (the real package's)

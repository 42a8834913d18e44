"""The built-in workloads: every folder ``lab/workloads/NAME/`` with a ``workload.yaml``, read and checked once.

A folder is one workload, named after it. Its ``workload.yaml`` is the format users write for their own
workloads (docs/workloads.md, lab.workloads.user_workload), with what a built-in needs beyond it:

* ``programs``: numalab's own static programs (built from images/workloads, laid into the guest's
  /usr/bin), instead of a user's ``files`` (copied to /workload, where a user's command runs);
* ``tools`` by absolute path only (a tool is looked for when a run's image is built, not when numalab
  starts: a host may lack a tool it never runs); no ``packages`` (a package would carry all its programs);
* ``command`` placeholders beyond the user's ``{cpus}``, ``{nodes}``, ``{mem_mib}`` and ``{duration}``:
  ``{seconds}`` (the duration in whole seconds, at least 1, for tools that take whole seconds), and those
  ``scale: scale.py`` gives, its ``scale(topology, duration)`` returning a mapping of name to value (threads
  per process, MiB a thread, ...; a LabError for a topology the workload cannot run on);
* ``results``: ``json-line`` (numalab's programs print ``NUMALAB_RESULT {json}``; every declared metric must
  be a finite number in it), ``parse: parse.py``, whose ``parse(stdout)`` returns the figures or
  ``{"parse_error": why}`` (a host tool's own output; the guest's, so untrusted: lab.untrusted.to_float), or
  ``reader: NAME``, one of lab.workloads.output_readers.READERS that several folders share (perf bench numa
  mem's summary); a user's ``regex`` is not used by a built-in;
* ``metrics``: each also has a ``label`` (compare's and the report's), and a rate a ``twin`` (``work``: the
  result's count of the same work, ``scale``: work units a count, ``label``), its per-vCPU-second twin
  (lab.analysis.metrics). A metric several built-ins report (``elapsed_s``, ``gbps``) is declared the same
  in each.

The fields are those of ``$defs.builtin`` in lab/schemas/workload.schema.json, the schema of users' workload
files: tests/unit/test_workload_folders.py checks every folder against it. They are checked here by hand, not
by jsonschema, whose import alone would add 75-150 ms (measured on a busy 2-core host) to the start of every
command (every command reads the folders); that test also shows both refuse the same mistakes.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import yaml

from lab import schemas
from lab.datafile import load_yaml
from lab.errors import LabError
from lab.paths import REPO_ROOT
from lab.topology.model.topology import Topology
from lab.workloads.metric_declarations import TwinOf, WorkloadMetric
from lab.workloads.output_readers import READERS
from lab.workloads.workload_type import MEM_SHARE, RESULT_KEY, Workload

FOLDERS = Path(__file__).resolve().parent
DEFINITION = "workload.yaml"
_SCHEMA = schemas.load_schema("workload")["$defs"]["builtin"]  # (the fields' names: the schema's, in its order)
KEYS = tuple(_SCHEMA["properties"])
USER_ONLY = {"files": "programs (numalab's own, from images/workloads)", "packages": "tools (by path)"}
METRIC_KEYS = tuple(_SCHEMA["properties"]["metrics"]["items"]["properties"])
TWIN_KEYS = tuple(_SCHEMA["properties"]["metrics"]["items"]["properties"]["twin"]["properties"])
RESULT_KINDS = tuple(_SCHEMA["properties"]["results"]["properties"])
PLACEHOLDER = re.compile(r"\{([a-z_][a-z0-9_]*)\}")
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
# The built-ins' files are the package's own, read at every start: by libyaml (a few ms for them all), not by
# lab.datafile's strict pure-Python reader for users' files (about 65 ms); tests/unit/test_workload_folders.py
# reads each with the strict one too (no key given twice, no NaN, ...). Without libyaml, the strict one.
FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def placeholders(topo: Topology, duration: float) -> dict[str, str]:
    """What every built-in's command may name: the user format's four (the same values) and ``{seconds}``."""
    return {
        "cpus": str(topo.total_cpus),
        "nodes": str(len(topo.nodes)),
        "mem_mib": str(max(8, int(topo.total_memory_mib * MEM_SHARE))),
        "duration": f"{duration:g}",
        "seconds": str(max(1, round(duration))),
    }


def _command(template: str, scale: Callable | None) -> Callable[[Topology, float], str]:
    def cmd(topo: Topology, duration: float) -> str:
        values = placeholders(topo, duration)
        scaled = {str(k): str(v) for k, v in (scale(topo, duration) if scale else {}).items()}
        if clash := sorted(set(scaled) & set(values)):
            raise LabError(f"scale.py: gives {{{clash[0]}}}, which every command has already")
        values |= scaled
        return PLACEHOLDER.sub(lambda m: values.get(m.group(1), m.group(0)), template)

    return cmd


def _hook(folder: Path, where: str, file: object, function: str) -> Callable:
    """``function`` of the folder's Python file ``file`` (loaded by path: each folder's hooks have the same names)."""
    if not isinstance(file, str) or not re.fullmatch(r"\w+\.py", file) or not (folder / file).is_file():
        raise LabError(f"{where}: expected the name of a .py file in {folder.name}/, got {file!r}")
    spec = importlib.util.spec_from_file_location(f"lab.workloads.{folder.name.replace('-', '_')}.{file[:-3]}",
                                                  folder / file)  # fmt: skip
    if spec is None or spec.loader is None:
        raise LabError(f"{where}: cannot load {file}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if not callable(fn):
        raise LabError(f"{where}: {file} has no function {function}()")
    return fn


def _names(data: dict, key: str) -> tuple[str, ...]:
    value = data.get(key) or []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LabError(f"{key}: expected a list of names")
    return tuple(value)


def _tools(data: dict) -> dict[str, str]:
    """Each tool's name in the guest image (lab.workloads.image_layers.GUEST_TOOLS) -> its path on the host."""
    tools = {}
    for i, path in enumerate(_names(data, "tools")):
        if not path.startswith("/"):
            raise LabError(f"tools[{i}]: a built-in names its tool by its absolute path, got {path!r}")
        tools[Path(path).name] = path
    return tools


def _twin(raw: object, where: str) -> TwinOf | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or sorted(raw) != sorted(TWIN_KEYS):
        raise LabError(f"{where}: expected {{{', '.join(TWIN_KEYS)}}}")
    scale = raw["scale"]
    if not isinstance(scale, (int, float)) or isinstance(scale, bool) or scale <= 0:
        raise LabError(f"{where}.scale: expected a number > 0 (1.0e-9, not 1e-9, which YAML reads as text)")
    if not all(isinstance(raw[k], str) and raw[k] for k in ("work", "label")):
        raise LabError(f"{where}: work and label are texts")
    return TwinOf(raw["work"], float(scale), raw["label"])


def _metric(raw: object, where: str) -> WorkloadMetric:
    if not isinstance(raw, dict):
        raise LabError(f"{where}: expected {{{', '.join(METRIC_KEYS)}}}")
    if unknown := sorted(str(k) for k in set(raw) - set(METRIC_KEYS)):
        raise LabError(f"{where}.{unknown[0]}: unknown field (known: {', '.join(METRIC_KEYS)})")
    name, label, unit = raw.get("name"), raw.get("label"), raw.get("unit", "")
    if not isinstance(name, str) or not RESULT_KEY.fullmatch(name):
        raise LabError(f"{where}.name: expected a word, got {name!r}")
    if not isinstance(label, str) or not label or not isinstance(unit, str):
        raise LabError(f"{where}: label (compare's name for it) and unit are texts")
    better = raw.get("higher_is_better")
    if not isinstance(better, bool):
        raise LabError(f"{where}.higher_is_better: missing or not true/false, got {better!r}")
    mean = raw.get("mean", "amean")
    if mean not in ("amean", "hmean"):
        raise LabError(f"{where}.mean: expected amean or hmean (rates), got {mean!r}")
    twin = _twin(raw.get("twin"), f"{where}.twin")
    return WorkloadMetric(name, label, unit, "higher" if better else "lower", mean, twin)


def _results(raw: object, folder: Path) -> tuple[str, Callable | None]:
    """(the JSON result line's prefix, None) or ("", the folder's parser or the reader it names)."""
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in RESULT_KINDS:
        raise LabError("results: expected {json-line: PREFIX}, {parse: parse.py} or {reader: NAME}")
    kind, value = next(iter(raw.items()))
    if kind == "parse":
        return "", _hook(folder, "results.parse", value, "parse")
    if kind == "reader":
        if not isinstance(value, str) or value not in READERS:
            raise LabError(f"results.reader: expected one of {', '.join(READERS)}, got {value!r}")
        return "", READERS[value]
    if not isinstance(value, str) or not value.strip() or "\n" in value:
        raise LabError(f"results.json-line: expected the prefix of the result line, got {value!r}")
    return value, None


def _workload(data: object, folder: Path) -> tuple[Workload, dict[str, str]]:
    if not isinstance(data, dict):
        raise LabError("expected a mapping with description, command, results and metrics")
    for key, instead in USER_ONLY.items():
        if key in data:
            raise LabError(f"{key}: a user's workload field; a built-in names {instead}")
    if unknown := sorted(str(k) for k in set(data) - set(KEYS)):
        raise LabError(f"{unknown[0]}: unknown field (known: {', '.join(KEYS)})")
    if data.get("name", folder.name) != folder.name:
        raise LabError(f"name: {data['name']!r}, but a built-in is named after its folder ({folder.name})")
    command, description = data.get("command"), data.get("description")
    if not isinstance(command, str) or not command.strip():
        raise LabError("command: missing (the shell command the guest runs)")
    if not isinstance(description, str) or not description.strip():
        raise LabError("description: missing (one line for numalab workload list)")
    scale = _hook(folder, "scale", data["scale"], "scale") if "scale" in data else None
    prefix, parse = _results(data.get("results"), folder)
    raw = data.get("metrics")
    if not isinstance(raw, list) or not raw:
        raise LabError("metrics: missing (a list of {name, label, unit, higher_is_better, mean, twin})")
    metrics = tuple(_metric(m, f"metrics[{i}]") for i, m in enumerate(raw))
    tools = _tools(data)
    workload = Workload(folder.name, description.strip(), _command(command.strip(), scale),
                        "tool" if parse else "lab", programs=_names(data, "programs"), tools=tuple(tools),
                        metrics=metrics, parse=parse, result_prefix=prefix or "NUMALAB_RESULT ",
                        folder=str(_shown(folder)))  # fmt: skip
    return workload, tools


def _shown(path: Path) -> Path:
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


def read_folder(folder: Path, data: object) -> tuple[Workload, dict[str, str]]:
    """One built-in's folder, given its workload.yaml's data: its workload and its tools' host paths;
    one-line errors naming the file."""
    try:
        if not NAME.fullmatch(folder.name):
            raise LabError("a workload folder's name is lower-case letters, digits and '-'")
        if (folder.parent / f"{folder.name}.py").exists():
            raise LabError(f"a workload folder may not have the name of the module {folder.name}.py beside it")
        if (folder / "__init__.py").exists():
            raise LabError("a workload folder is no Python package: remove its __init__.py (hooks load by path)")
        return _workload(data, folder)
    except LabError as err:
        raise LabError(f"workload file {_shown(folder / DEFINITION)}: {err}") from None


def read_definition(folder: Path) -> object:
    """A folder's workload.yaml as data."""
    path = folder / DEFINITION
    if not path.is_file():
        raise LabError(f"{_shown(folder)}: a built-in workload's folder has no {DEFINITION}")
    if FAST_LOADER is None:
        return load_yaml(path, "workload file")
    try:
        return yaml.load(path.read_bytes(), Loader=FAST_LOADER)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise LabError(f"workload file {_shown(path)}: not valid YAML{at}") from None


def _same(kind: str, seen: dict, name: str, value: object, folder: str) -> None:
    """A metric or tool several folders name is the same in each."""
    if name in seen and seen[name][0] != value:
        raise LabError(f"{folder}: {kind} {name} is declared otherwise in {seen[name][1]}")
    seen.setdefault(name, (value, folder))


def _leftover(folder: Path) -> bool:
    """A folder holding nothing but ``__pycache__``: what a checkout that removed a built-in leaves behind (git
    does not remove the untracked bytecode Python wrote beside its hooks). Not a workload, and no error: every
    command, ``--version`` too, reads the folders when it starts."""
    return [p.name for p in folder.iterdir()] == ["__pycache__"]  # (an empty folder is one being made: an error)


def _package(folder: Path) -> bool:
    """A Python package of lab.workloads (``__init__.py`` and no workload.yaml), not a workload: the package's
    modules and the workloads' folders share lab/workloads/."""
    return (folder / "__init__.py").exists() and not (folder / DEFINITION).exists()


def discover(root: Path = FOLDERS) -> tuple[dict[str, Workload], dict[str, str]]:
    """Every folder's workload, by name (in the folders' order), and every built-in tool's host path. The
    package's modules (``*.py``) and subpackages sit beside the folders and are none of them."""
    folders = sorted(
        p for p in root.iterdir()
        if p.is_dir() and not p.name.startswith(("_", ".")) and not _leftover(p) and not _package(p)
    )  # fmt: skip
    workloads: dict[str, Workload] = {}
    metrics: dict[str, tuple] = {}
    tools: dict[str, tuple] = {}
    for folder in folders:
        workload, paths = read_folder(folder, read_definition(folder))
        workloads[workload.name] = workload
        for m in workload.metrics:
            _same("metric", metrics, m.name, m, workload.folder)
        for tool, path in paths.items():
            _same("tool", tools, tool, path, workload.folder)
    return workloads, {tool: path for tool, (path, _) in tools.items()}


WORKLOADS, BUILTIN_TOOLS = discover()


def builtin_metric(name: str) -> WorkloadMetric | None:
    """The built-in workload metric ``workload.<name>`` (or the rate whose per-vCPU-second twin it is), or
    None: a user's workload may not declare one (lab.workloads.user_workload; compare fixes its direction)."""
    for w in WORKLOADS.values():
        for m in w.metrics:
            if name in (m.name, m.twin_key):
                return m
    return None


# The built-in figures that are durations (unit "s"): lab.analysis.plausible bounds them by the host's window.
SECONDS_METRICS = frozenset(m.name for w in WORKLOADS.values() for m in w.metrics if m.unit == "s")


def get_workload(name: str) -> Workload:
    if name not in WORKLOADS:
        raise LabError(f"--workload {name}: unknown workload (known: {', '.join(WORKLOADS)})")
    return WORKLOADS[name]

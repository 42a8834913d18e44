"""Matrix specs: topologies x kernels x workloads x settings x repeats, as a YAML file.

::

    name: ci-smoke
    topologies: [ring-2, ring-4, {name: ring-8, cpus_per_node: 1}]
    kernels: [stock, {name: patched, path: /path/to/bzImage},
              {name: revert, build: {patches: [kernel-configs/patches/seed003-revert-numa-imbalance-min.patch]}}]
    workloads: [numa01, {name: pairs, duration: 10}, my-repro.yaml]   # a workload file: relative to this one
    settings: [{name: on}, {name: off, numa_balancing: off, knobs: {scan_delay_ms: 100}},
               {name: qemu10, qemu: backports},   # qemu: system (default), backports, charge, or a path
               {name: virtual, qemu: backports, clock: virtual},   # clock: host (default) or virtual
               {name: costly, remote_latency: slit}]   # remote_latency: off (default), slit or table (TCG)
    repeats: 3
    duration: 20                 # default workload duration
    timeout: 300                 # per run (default: scaled to the run)
    include: [{topology: ring-4}]          # keep only runs matching one of these
    exclude: [{topology: ring-8, workload: pairs}]
    baseline: {kernel: stock}    # or {setting: on}
    gates:
      - {metric: workload.gbps, worse_than_baseline_pct: 5, significant: true}
    hosts:                       # optional: libvirt hosts to spread the runs over
      - {uri: qemu:///system, capacity: 2}
      - {uri: qemu+ssh://lab@box2/system, capacity: 4, pool_dir: /srv/numalab, upload: true}

The fields' types, ranges and names are checked against ``lab/schemas/matrix.schema.json`` first; what needs
more (a topology that loads, a workload that exists, distinct names, a baseline among the axes) is checked here.

Expansion order interleaves kernels (and settings) innermost, so runs go
A B A B and drift affects every side alike. Run ids are stable:
``<topology>.<kernel>.<workload>.<setting>.r<N>``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from lab import schemas
from lab.analysis.ab_plan import ABPlan
from lab.analysis.expectations import Expectation
from lab.analysis.metrics import METRIC_KEYS
from lab.datafile import load_yaml
from lab.errors import LabError
from lab.guest.settings import check_duration
from lab.matrix.spec_parts import parse_auto, parse_expect
from lab.paths import resolved
from lab.run.options import RunOptions
from lab.run.scheduler import label_of as scheduler_label
from lab.topology.model.ref import SPEC_SIZE_NAMES, TopologyRef
from lab.topology.model.topology import check_name
from lab.vm.libvirt.libvirt_hostspec import HostSpec, parse_hosts
from lab.vm.tcg.machine_model import fill as fill_model
from lab.vm.tcg.machine_model import get_model
from lab.workloads.registry import WORKLOADS
from lab.workloads.user_workload import is_workload_file, load_workload_file

EXAMPLES = Path(__file__).parent / "examples"
# Where a matrix given by name is looked up: the general examples, then each folder of lab/seeds/ (a seed's
# matrices live with the rest of its slice).
SEED_FOLDERS = Path(__file__).parents[1] / "seeds"


def example_path(name: str) -> Path | None:
    """The built-in matrix called ``name``, or None."""
    for folder in (EXAMPLES, *sorted(p for p in SEED_FOLDERS.iterdir() if p.is_dir())):
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    return None


def _scalar(value: object) -> str:
    """YAML 1.1 reads on/off/yes/no as booleans; a name or value of 'on' stays 'on'."""
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_+-]+", "-", text).strip("-") or "x"


@dataclass(frozen=True)
class KernelChoice:
    name: str
    spec: str  # what `numalab run --kernel` takes: stock, a path, or a built kernel name
    build: dict | None = None  # a build recipe (numalab kernel build), built before the runs


@dataclass(frozen=True)
class WorkloadChoice:
    name: str
    duration: float
    file: str = ""  # a user's workload file (absolute; lab.workloads.user_workload), "" for a built-in

    @property
    def spec(self) -> str:
        """What ``numalab run --workload`` takes: the built-in's name or the workload file."""
        return self.file or self.name


@dataclass(frozen=True)
class SettingChoice:
    name: str
    numa_balancing: str = "on"
    knobs: tuple[tuple[str, str], ...] = ()
    qemu: str = ""  # the QEMU binary (numalab run --qemu): "" the default, system, backports or a path
    clock: str = "host"  # the guest's clock (numalab run --clock): host or virtual
    remote_latency: str = "off"  # numalab run --remote-latency: off or slit
    scheduler: str = "fair"  # numalab run --scheduler (a setting's, or the matrix's scheduler: axis)
    quantum: int = 0  # numalab run --quantum: parallel guest time under the virtual clock (0: one shared clock)
    insns_per_ns: int = 1  # numalab run --insns-per-ns: instructions a guest ns under the virtual clock
    coherence: str = ""  # numalab run --coherence: on or off ("": the default, off)


@dataclass(frozen=True)
class MatrixRun:
    id: str
    topology: TopologyRef
    kernel: KernelChoice
    workload: WorkloadChoice
    setting: SettingChoice
    repeat: int

    def axes(self) -> dict[str, str]:
        return {"topology": self.topology.label, "kernel": self.kernel.name, "workload": self.workload.name,
                "setting": self.setting.name}  # fmt: skip

    def params(self) -> dict:
        params = asdict(self)
        if not self.workload.file:  # (a matrix of built-ins keeps the fingerprint it always had)
            del params["workload"]["file"]
        if self.setting.scheduler == "fair":  # (and one without schedulers too)
            del params["setting"]["scheduler"]
        return params


@dataclass(frozen=True)
class Gate:
    metric: str
    worse_than_baseline_pct: float
    significant: bool = True

    @property
    def name(self) -> str:
        sig = ", significant" if self.significant else ""
        return f"{self.metric} not worse than baseline by > {self.worse_than_baseline_pct:g}%{sig}"


@dataclass
class MatrixSpec:
    name: str
    source: str
    runs: list[MatrixRun]
    kernels: list[KernelChoice]
    baseline: dict[str, str]
    gates: list[Gate]
    timeout: float | None
    description: str = ""
    hosts: list[HostSpec] = field(default_factory=list)  # libvirt hosts to spread runs over
    auto: ABPlan | None = None  # repeats: auto, its A/B plan (lab/matrix/spec_parts.py)
    expect: list[Expectation] = field(default_factory=list)  # the seed's directions, for numalab reproduce
    declared: tuple[str, ...] = ()  # metrics the matrix's workload files declare (workload.<name>), for gates

    def fingerprint(self) -> str:
        """Identity of what the runs are (not of gates or baseline, which only read results)."""
        blob = json.dumps([r.params() for r in self.runs] + [self.timeout], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def shard(self, index: int, count: int) -> list[MatrixRun]:
        """Shard index/count (1-based), deterministic and disjoint.

        The unit is a (topology, workload, repeat) cell with all its kernels
        and settings, so every shard holds whole A/B sets (and keeps their
        A B interleave); cells are dealt round-robin.
        """
        cells = list(dict.fromkeys((r.topology.label, r.workload.name, r.repeat) for r in self.runs))
        mine = {c for i, c in enumerate(cells) if i % count == index - 1}
        return [r for r in self.runs if (r.topology.label, r.workload.name, r.repeat) in mine]


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise LabError(f"--shard {text}: expected i/N with 1 <= i <= N, e.g. 2/4")
    return int(m.group(1)), int(m.group(2))


def _list(data: dict, key: str, default: list | None = None) -> list:
    """An axis: a list, or one entry alone (the schema: not empty)."""
    value = data.get(key, default)
    return value if isinstance(value, list) else [value]


def _topologies(data: dict) -> list[TopologyRef]:
    out = []
    for i, item in enumerate(_list(data, "topologies")):
        if isinstance(item, str):
            item = {"name": item}
        choice = TopologyRef(str(item["name"]), item.get("cpus_per_node"), item.get("mem_per_node"),
                             item.get("threads"))  # fmt: skip
        try:
            choice.load(SPEC_SIZE_NAMES)
        except LabError as err:
            raise LabError(f"topologies[{i}]: {err}") from None
        out.append(choice)
    return out


def _kernels(data: dict) -> list[KernelChoice]:
    out = []
    for item in _list(data, "kernels", ["stock"]):
        if isinstance(item, str):
            out.append(KernelChoice(_slug(Path(item).name if "/" in item else item), item))
            continue
        name = _slug(_scalar(item["name"]))
        if "build" in item:
            out.append(KernelChoice(name, name, dict(item["build"])))
        else:
            out.append(KernelChoice(name, str(item.get("path", item["name"]))))
    names = [k.name for k in out]
    if len(set(names)) < len(names):
        raise LabError(f"kernels: names must be distinct, got {', '.join(names)}")
    return out


def _workloads(data: dict, default_duration: float, base: Path, declared: set[str]) -> list[WorkloadChoice]:
    """Built-in names and workload files (FILE.yaml, relative to the matrix file), each with its duration; the
    metrics the files declare are added to ``declared``."""
    out = []
    for i, item in enumerate(_list(data, "workloads")):
        if isinstance(item, str):
            item = {"name": item}
        name = item["name"]
        file = ""
        if is_workload_file(name):
            try:
                path = resolved(base / name, f"workload file {base / name}")
                workload = load_workload_file(path)
            except LabError as err:
                raise LabError(f"workloads[{i}]: {err}") from None
            file, name = str(path), workload.name
            if workload.user is not None:
                declared.update(f"workload.{m.name}" for m in workload.user.metrics)
        elif name not in WORKLOADS:
            raise LabError(f"workloads[{i}]: unknown workload {name!r} (known: {', '.join(WORKLOADS)}, or FILE.yaml)")
        duration = item.get("duration", default_duration)
        if "duration" in item:  # (the matrix's own duration: is checked as --duration)
            try:
                check_duration(float(duration))
            except LabError as err:
                raise LabError(f"workloads[{i}].duration: {str(err).removeprefix('--duration: ')}") from None
        out.append(WorkloadChoice(name, float(duration), file))
    return out


def _settings(data: dict) -> list[SettingChoice]:
    out = []
    for item in _list(data, "settings", [{"name": "default"}]):
        if item.get("model") is not None:  # (the modelled machine by one name: its parts where not given)
            given = {k: item.get(k) for k, _ in get_model(str(item["model"])).options}
            item = item | fill_model(str(item["model"]), given)
        bal = item.get("numa_balancing", "on")
        bal = {True: "on", False: "off"}.get(bal, bal)
        knobs = item.get("knobs") or {}  # (the schema: KNOB_NAMES' whole numbers, DIR/NAME words)
        pairs = tuple(sorted((k, str(v)) for k, v in knobs.items()))
        qemu = item.get("qemu", "")
        clock = item.get("clock", "host")  # (the schema: one of CLOCKS)
        latency = item.get("remote_latency", "off")  # (the schema: one of REMOTE_LATENCY)
        sched = str(item.get("scheduler", "fair"))
        quantum = int(item.get("quantum", 0))  # (the schema: whole numbers; their ranges are run's checks)
        ipns = int(item.get("insns_per_ns", 1))
        coh = item.get("coherence", "")
        coh = {True: "on", False: "off"}.get(coh, coh)  # (the schema: on, off or a YAML boolean)
        out.append(SettingChoice(_slug(_scalar(item["name"])), bal, pairs, qemu, clock, latency, sched, quantum, ipns,
                                 coh))  # fmt: skip
    return _scheduler_axis(data, out)


def _scheduler_axis(data: dict, settings: list[SettingChoice]) -> list[SettingChoice]:
    """The matrix's ``scheduler:`` (one, or a list: an axis): every setting with each scheduler, named
    SETTING-SCHEDULER (the scheduler's name alone for the implicit 'default' setting) when there are several."""
    if "scheduler" not in data:
        return settings
    scheds = [str(s) for s in _list(data, "scheduler")]
    if len(set(scheds)) < len(scheds):
        raise LabError(f"scheduler: the schedulers must differ, got {', '.join(scheds)}")
    for s in settings:
        if s.scheduler != "fair":
            raise LabError(
                f"settings: {s.name}: scheduler: not with the matrix's own scheduler: (give one or the other)"
            )
    implicit = "settings" not in data
    out = []
    for s in settings:
        for sched in scheds:
            label = _slug(scheduler_label(sched))
            name = s.name if len(scheds) == 1 else label if implicit else f"{s.name}-{label}"
            out.append(replace(s, name=name, scheduler=sched))
    return out


def _filters(data: dict, key: str) -> list[dict[str, str]]:
    return [{k: _scalar(v) for k, v in f.items()} for f in data.get(key) or []]


def _matches(run: MatrixRun, f: dict[str, str]) -> bool:
    axes = run.axes() | {"topology_name": run.topology.name}
    return all(axes.get(k) == v or (k == "topology" and axes["topology_name"] == v) for k, v in f.items())


def _seconds(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def run_options_of(run: MatrixRun, kernel_arg: str, timeout: float | None, **more: object) -> RunOptions:
    """The options of the child that runs ``run`` (checked on construction: what numalab run refuses, a
    matrix refuses)."""
    return RunOptions.of(
        topology=run.topology,
        kernels=(kernel_arg,),
        workload=run.workload.spec,
        duration=run.workload.duration,
        numa_balancing=run.setting.numa_balancing,
        knobs=tuple(f"{k}={v}" for k, v in run.setting.knobs),
        qemu=run.setting.qemu,
        clock=run.setting.clock,
        remote_latency=run.setting.remote_latency,
        quantum=run.setting.quantum,
        insns_per_ns=run.setting.insns_per_ns,
        coherence=run.setting.coherence,
        schedulers=(run.setting.scheduler,),
        seed=run.repeat - 1 if run.setting.clock == "virtual" else None,  # repeat r: seed r - 1, every cell alike
        timeout=timeout or None,
        **more,  # type: ignore[arg-type]
    )


def _check_run_options(runs: list[MatrixRun], timeout: float | None) -> None:
    """Each run's options, as numalab run checks them (once per run that differs in more than its repeat)."""
    seen = set()
    for run in runs:
        key = tuple(run.axes().values())
        if key in seen:
            continue
        seen.add(key)
        try:
            run_options_of(run, run.kernel.spec, timeout)
        except LabError as err:
            raise LabError(f"run {run.id}: {err}") from None


def load_matrix(path_or_name: str) -> MatrixSpec:
    path = Path(path_or_name)
    if not path.exists() and "/" not in path_or_name and not path_or_name.endswith((".yaml", ".yml")):
        path = example_path(path_or_name) or path

    if not path.is_file():
        raise LabError(f"matrix {path_or_name}: no such file or example")
    data = load_yaml(path, "matrix")
    try:
        return parse_matrix(data, str(path), path.stem)
    except LabError as err:
        raise LabError(f"{path}: {err}") from None


def _repeats(data: dict) -> tuple[int, ABPlan | None]:
    """The repeats a run gets (auto: its minimum pairs) and the A/B plan if repeats is auto (its check caps
    max_pairs as numalab run caps --repeat)."""
    repeats = data.get("repeats", 1)
    auto = parse_auto(data.get("auto")) if repeats == "auto" else None
    if auto is None and data.get("auto") is not None:
        raise LabError("auto: only with repeats: auto")
    return (auto.min_pairs if auto else repeats), auto  # (the schema: 1..MAX_REPEAT or auto)


def _runs(
    data: dict,
    topologies: list[TopologyRef],
    kernels: list[KernelChoice],
    workloads: list[WorkloadChoice],
    settings: list[SettingChoice],
    repeats: int,
) -> list[MatrixRun]:
    """The cross product of the axes, then include/exclude."""
    for axis, items in (("topologies", [t.label for t in topologies]), ("workloads", [w.name for w in workloads]),
                        ("settings", [s.name for s in settings])):  # fmt: skip
        if len(set(items)) < len(items):
            raise LabError(f"{axis}: entries must be distinct, got {', '.join(items)}")
    runs = []
    for t in topologies:
        for w in workloads:
            for r in range(1, repeats + 1):
                for s in settings:
                    for k in kernels:
                        rid = f"{t.label}.{k.name}.{w.name}.{s.name}.r{r}"
                        runs.append(MatrixRun(rid, t, k, w, s, r))
    include, exclude = _filters(data, "include"), _filters(data, "exclude")
    if include:
        runs = [r for r in runs if any(_matches(r, f) for f in include)]
    runs = [r for r in runs if not any(_matches(r, f) for f in exclude)]
    if not runs:
        raise LabError("include/exclude: no run is left")
    return runs


def _baseline(
    data: dict, kernels: list[KernelChoice], settings: list[SettingChoice], auto: ABPlan | None
) -> tuple[str, str]:
    """The baseline's axis (kernel or setting) and its value, one of that axis's names."""
    baseline = data.get("baseline") or {"kernel": kernels[0].name}  # (the schema: kernel or setting)
    axis, value = next(iter(baseline.items()))
    names = [k.name for k in kernels] if axis == "kernel" else [s.name for s in settings]
    value = _scalar(value)
    if value not in names:
        raise LabError(f"baseline.{axis}: {value!r} is not one of the matrix's {axis}s ({', '.join(names)})")
    if auto is not None and len(names) < 2:  # (numalab run --repeat auto refuses one kernel too)
        raise LabError(f"repeats: auto compares the baseline's {axis}s, and the matrix has one ({names[0]}): "
                       f"give at least two {axis}s")  # fmt: skip
    return axis, value


def _gates(data: dict, declared: set[str]) -> list[Gate]:
    gates = []
    for i, g in enumerate(data.get("gates") or []):  # (the schema: each gate's fields and their types)
        if g["metric"] not in METRIC_KEYS and g["metric"] not in declared:
            known = ", ".join([*METRIC_KEYS, *sorted(declared)])
            raise LabError(f"gates[{i}].metric: unknown metric {g['metric']!r} (known: {known})")
        gates.append(Gate(g["metric"], float(g["worse_than_baseline_pct"]), g.get("significant", True)))
    return gates


def parse_matrix(data: object, source: str, default_name: str) -> MatrixSpec:
    data = schemas.check(data, "matrix")
    repeats, auto = _repeats(data)
    duration = data.get("duration", 20)
    if not _seconds(duration):  # (the schema: > 0; infinity is a number too)
        raise LabError(f"duration: must be a number of seconds > 0, got {duration!r}")
    timeout = data.get("timeout")
    if timeout is not None and not _seconds(timeout):
        raise LabError(f"timeout: must be a number of seconds > 0, got {timeout!r}")
    topologies, kernels = _topologies(data), _kernels(data)
    declared: set[str] = set()
    workloads, settings = _workloads(data, float(duration), Path(source).parent, declared), _settings(data)
    runs = _runs(data, topologies, kernels, workloads, settings, repeats)
    axis, value = _baseline(data, kernels, settings, auto)
    _check_run_options(runs, float(timeout) if timeout else None)
    gates = _gates(data, declared)
    hosts = parse_hosts(data["hosts"]) if data.get("hosts") is not None else []
    expect = parse_expect(data.get("expect"), [w.name for w in workloads])
    name = check_name(data.get("name") or default_name, "name")
    return MatrixSpec(name, source, runs, kernels, {axis: value}, gates,
                      float(timeout) if timeout else None, str(data.get("description", "")), hosts, auto,
                      expect, tuple(sorted(declared)))  # fmt: skip

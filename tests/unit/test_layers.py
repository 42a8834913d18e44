"""The package reads one way: topology -> placement -> VM -> guest -> trace -> workloads -> analysis -> report,
with the front end on top, every package on a layer of its own. No module imports one of a higher layer, and
no import cycle exists, even through imports made inside functions (the ones that hide cycles). Inside lab/vm/
and lab/topology/ their parts are layered too (VM_PARTS, TOPOLOGY_PARTS)."""

from __future__ import annotations

import ast
from pathlib import Path

from common import REPO

LAB = REPO / "lab"
# Every top-level package and module of lab/, bottom first: each on a layer of its own, so that any import
# between two of them has a direction. A module may import its own package and those before it, never one
# after it (lab.guest lays out the images it is given, below lab.workloads, which says what a workload needs).
ORDER = (
    "__init__", "errors", "untrusted", "datafile", "paths", "apt", "cpulist", "events", "record_files", "min_effect",
    "schemas",
    "topology", "kernel", "placement", "vm", "guest", "trace", "workloads", "host", "analysis", "report", "run",
    "matrix", "bisect", "seeds", "cli",
)  # fmt: skip
LAYERS = {name: layer for layer, name in enumerate(ORDER)}


def _module(path: Path) -> str:
    rel = path.relative_to(REPO).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _graph() -> dict[str, set[str]]:
    modules = {_module(p): p for p in LAB.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name in modules and name != mod:
                    graph[mod].add(name)
    return graph


def _top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def test_every_part_of_lab_has_a_layer_of_its_own() -> None:
    assert len(LAYERS) == len(ORDER), "a name is twice in ORDER"
    assert {_top(m) for m in _graph()} <= set(LAYERS), set(map(_top, _graph())) - set(LAYERS)


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{m} -> {d}" for m, deps in graph.items() for d in deps if LAYERS[_top(d)] > LAYERS[_top(m)])


def test_no_module_imports_upward() -> None:
    assert _upward(_graph()) == []


def test_a_workload_import_in_the_guest_would_be_upward() -> None:
    """The arrow issue 50 found (lab.guest.image took its tools from lab.workloads.registry) is upward now: were
    it back, the test above would fail."""
    graph = _graph()
    graph["lab.guest.image"] = graph["lab.guest.image"] | {"lab.workloads.registry"}
    assert _upward(graph) == ["lab.guest.image -> lab.workloads.registry"]


# Inside lab/vm/ and lab/topology/, their parts in layers, bottom first: a module may import its own part and the
# parts of a lower layer, never one of its own layer or above, so that two parts on one layer know nothing of each
# other. lab/vm/: TCG's instrumentation (tcg/, the guest clock BootSpec carries), below the seam every backend
# implements and shares (the package's own modules: backend.py, the console, the share, the hang diagnosis, QMP),
# below the backends, direct QEMU (qemu/) and libvirt (libvirt/), neither of which imports the other.
VM_PARTS = {"tcg": 0, "": 1, "qemu": 2, "libvirt": 2}
# lab/topology/: its folders. The model (model/: what a spec says, the machines read into one, sysfs read) below
# what the kernel will make of it (predictions/) and the pictures (pictures/), below the importers of real machines
# (importers/), which check what they write against the predictions. The package itself holds nothing ("").
TOPOLOGY_PARTS = {"": 0, "model": 1, "predictions": 2, "pictures": 2, "importers": 3}


def _part(module: str, package: str) -> str | None:
    """lab.vm.qemu.emulator -> "qemu" (its folder in ``package``, lab/vm/), lab.vm.backend -> "" (the package's
    own); None outside the package."""
    parts = module.split(".")
    if parts[:2] != ["lab", package]:
        return None
    return parts[2] if len(parts) > 2 and (LAB / package / parts[2]).is_dir() else ""


def _vm_part(module: str) -> str | None:
    return _part(module, "vm")


def _topology_part(module: str) -> str | None:
    """lab.topology.importers.hwloc -> "importers"; "" for the package itself; None outside lab/topology/."""
    return _part(module, "topology")


def _inner_upward(graph: dict[str, set[str]], part_of, layers: dict[str, int]) -> list[str]:
    """The imports inside one package from a part to one of its own layer or above (``part_of``: a module's part,
    None outside the package)."""
    bad = []
    for m, deps in graph.items():
        for d in deps:
            pm, pd = part_of(m), part_of(d)
            if pm is not None and pd is not None and pm != pd and layers[pd] >= layers[pm]:
                bad.append(f"{m} -> {d}")
    return sorted(bad)


def test_every_module_of_vm_and_topology_has_a_part() -> None:
    """Every folder of lab/vm/ and lab/topology/ has a layer, and lab/topology/ keeps its modules in its folders."""
    graph = _graph()
    assert {_vm_part(m) for m in graph} - {None} <= set(VM_PARTS)
    assert {_topology_part(m) for m in graph} - {None} <= set(TOPOLOGY_PARTS)
    assert [m for m in graph if _topology_part(m) == ""] == ["lab.topology"]


def test_the_parts_of_vm_and_topology_import_downward_only() -> None:
    graph = _graph()
    assert _inner_upward(graph, _vm_part, VM_PARTS) == []
    assert _inner_upward(graph, _topology_part, TOPOLOGY_PARTS) == []


def test_a_backend_reaching_into_another_would_be_seen() -> None:
    """The libvirt backend took BootSpec and smp_layout from the QEMU backend's argv (issue 69): were it back,
    the test above would fail, as would an importer's model imported by the model."""
    graph = _graph()
    graph["lab.vm.libvirt.libvirt_xml"] = graph["lab.vm.libvirt.libvirt_xml"] | {"lab.vm.qemu.qemu_argv"}
    graph["lab.vm.backend"] = graph["lab.vm.backend"] | {"lab.vm.qemu.qemu_argv"}
    assert _inner_upward(graph, _vm_part, VM_PARTS) == [
        "lab.vm.backend -> lab.vm.qemu.qemu_argv",
        "lab.vm.libvirt.libvirt_xml -> lab.vm.qemu.qemu_argv",
    ]
    graph["lab.topology.model.spec"] = graph["lab.topology.model.spec"] | {"lab.topology.importers.machine_grid"}
    assert _inner_upward(graph, _topology_part, TOPOLOGY_PARTS) == [
        "lab.topology.model.spec -> lab.topology.importers.machine_grid"
    ]
    # (and a picture drawn from a prediction: two parts of one layer)
    graph["lab.topology.pictures.render"] = graph["lab.topology.pictures.render"] | {
        "lab.topology.predictions.cpu_view"
    }
    assert len(_inner_upward(graph, _topology_part, TOPOLOGY_PARTS)) == 2


def test_no_import_cycles() -> None:
    graph = _graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_checks_see_a_cycle_and_an_upward_import(tmp_path, monkeypatch) -> None:
    """The test above can fail: a fake package with a cycle and an upward import is caught."""
    fake = tmp_path / "lab"
    (fake / "vm").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "vm" / "__init__.py").write_text("")
    (fake / "vm" / "a.py").write_text("def f():\n    from lab.report import b\n")
    (fake / "report").mkdir()
    (fake / "report" / "__init__.py").write_text("")
    (fake / "report" / "b.py").write_text("from lab.vm.a import f\n")
    monkeypatch.setattr(__import__(__name__), "LAB", fake)
    monkeypatch.setattr(__import__(__name__), "REPO", tmp_path)
    graph = _graph()
    assert "lab.report.b" in graph["lab.vm.a"] and graph["lab.report.b"] == {"lab.vm.a"}
    try:
        test_no_module_imports_upward()
    except AssertionError:
        pass
    else:
        raise AssertionError("the upward import lab.vm.a -> lab.report.b was not seen")
    try:
        test_no_import_cycles()
    except AssertionError:
        pass
    else:
        raise AssertionError("the cycle lab.vm.a <-> lab.report.b was not seen")


def test_an_import_inside_a_function_says_why() -> None:
    """Imports sit at the top of a module; one inside a function is there for a reason (an optional or slow
    dependency, numalab's start-up time), and a comment on its line says which."""
    silent = []
    for p in sorted(LAB.rglob("*.py")):
        lines = p.read_text().splitlines()
        for fn in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for node in ast.walk(fn):
                    if isinstance(node, (ast.Import, ast.ImportFrom)):
                        text = lines[node.lineno - 1 : node.end_lineno]
                        if not any("#" in line for line in text):
                            silent.append(f"{p.relative_to(REPO)}:{node.lineno}")
    assert silent == []


def test_no_two_modules_share_a_file_name() -> None:
    """The package gives the context, so a name says one thing: ``lab/`` has no two modules of one file name
    (``__init__`` and ``__main__`` aside, and a built-in workload folder's hooks, ``lab/workloads/NAME/scale.py``
    and ``parse.py``: loaded by path, never imported by name, their folder is their name)."""
    seen: dict[str, list[str]] = {}
    for p in LAB.rglob("*.py"):
        if p.stem not in ("__init__", "__main__") and p.parent.parent != LAB / "workloads":
            seen.setdefault(p.name, []).append(str(p.relative_to(REPO)))
    assert {n: ps for n, ps in seen.items() if len(ps) > 1} == {}

"""The package reads one way: topology -> placement -> VM -> guest -> trace -> workloads -> analysis -> report,
with the front end on top, every package on a layer of its own. No module imports one of a higher layer, and
no import cycle exists, even through imports made inside functions (the ones that hide cycles)."""

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

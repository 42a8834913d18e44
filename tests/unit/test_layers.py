"""The package reads one way: topology -> placement -> VM -> guest -> trace -> analysis -> report, with the
front end on top. No module imports one of a higher layer, and no import cycle exists, even through
imports made inside functions (the ones that hide cycles)."""

from __future__ import annotations

import ast
from pathlib import Path

from common import REPO

LAB = REPO / "lab"
# Top-level package or module of lab/ -> layer. A module may import its own layer and those below.
LAYERS = {
    "__init__": 0, "errors": 0, "paths": 0, "datafile": 0, "untrusted": 0, "cpulist": 0, "events": 0,
    "record_files": 0, "min_effect": 0, "schemas": 0,
    "topology": 1, "kernel": 1,
    "placement": 2,
    "vm": 3,
    "guest": 4, "trace": 4, "workloads": 4,
    "host": 5,
    "analysis": 6,
    "report": 7,
    "run": 8,
    "matrix": 9,
    "bisect": 10,
    "seeds": 11,
    "cli": 12,
}  # fmt: skip


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


def test_every_part_of_lab_has_a_layer() -> None:
    assert {_top(m) for m in _graph()} <= set(LAYERS), set(map(_top, _graph())) - set(LAYERS)


def test_no_module_imports_upward() -> None:
    upward = [f"{m} -> {d}" for m, deps in _graph().items() for d in deps if LAYERS[_top(d)] > LAYERS[_top(m)]]
    assert upward == []


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

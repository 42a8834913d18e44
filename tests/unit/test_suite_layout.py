"""The suite's own scheduling (tests/suite_units.py): each list of modules that xdist keeps together as one work
unit is the list of modules that use the fixture the unit is for, read from their sources."""

from __future__ import annotations

import re

from common import REPO
from suite_units import HOST_SHARED_MODULES, V612_MODULES, work_unit

HOST_SHARED = re.compile(r"""usefixtures\(\s*["']host_shared["']\s*\)""")
V612 = re.compile(r"""def test_\w+\([^)]*\bv612\b""")


def _modules(pattern: re.Pattern) -> set[str]:
    found = {str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py") if pattern.search(p.read_text())}
    assert found, f"no module matches {pattern.pattern}: the scan is wrong"
    return found


def test_each_work_unit_is_every_module_that_uses_its_fixture() -> None:
    for pattern, listed in ((HOST_SHARED, HOST_SHARED_MODULES), (V612, V612_MODULES)):
        found = _modules(pattern)
        assert found == listed, (pattern.pattern, sorted(found - listed), sorted(listed - found))
    assert {work_unit(m) for m in HOST_SHARED_MODULES} == {"host_shared"}
    assert {work_unit(m) for m in V612_MODULES} == {"v612"}
    assert work_unit("tests/vm/test_vm_llc.py") == "tests/vm/test_vm_llc.py"

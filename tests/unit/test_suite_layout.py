"""The suite's own scheduling (tests/conftest.py): the list of modules that xdist keeps together as one work unit
is the list of modules that hold the ``host_shared`` lock, read from their sources."""

from __future__ import annotations

import re

from common import REPO
from suite_units import HOST_SHARED_MODULES, host_shared_scope

USES = re.compile(r"""usefixtures\(\s*["']host_shared["']\s*\)""")


def test_the_host_shared_work_unit_is_every_module_that_takes_the_lock() -> None:
    found = {str(p.relative_to(REPO)) for p in (REPO / "tests").rglob("test_*.py") if USES.search(p.read_text())}
    assert found, "no module uses host_shared: the scan is wrong"
    assert found == HOST_SHARED_MODULES, (sorted(found - HOST_SHARED_MODULES), sorted(HOST_SHARED_MODULES - found))
    assert {host_shared_scope(m) for m in found} == {"host_shared"}
    assert host_shared_scope("tests/vm/test_vm_llc.py") == "tests/vm/test_vm_llc.py"

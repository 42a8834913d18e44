"""pytest configuration shared by every test module.

Under CI (``CI`` set, as .ci/run has it) hypothesis runs derandomized: the same examples every run, so a
landing is judged on the code, not on which random inputs came up. Locally it explores new ones each run
(what found PyYAML's IndexError on an empty ``!!float``); a failure it finds is kept in
``.hypothesis/`` and replayed first next time.

The tiers' folders (unit, vm, kernel, libvirt) are on ``sys.path`` from the start, so a test module may
import another tier's helpers whichever folder pytest collects first (or alone)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

for _tier in ("unit", "vm", "kernel", "libvirt"):
    sys.path.insert(0, str(Path(__file__).parent / _tier))

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The slow pass runs two tests at a time (pytest-xdist --dist loadgroup, the Makefile's VM_JOBS): each module's
# tests stay on one worker, so a module fixture's boot or build happens once; the modules that start this
# host's libvirtd or act as its ordinary user share one group, so one worker runs them in turn. A test whose
# figures or bounds are the host's own time is marked ``alone`` and runs in the last pass, by itself.
SLOW_MARKS = ("vm", "kernel_build", "libvirt")
HOST_SHARED = {  # tests/<path> -> they start libvirtd, use the numalab-test account, or both
    "libvirt/test_libvirt_backend.py", "nested/test_nested.py", "kernel/test_ordinary_user.py",
    "vm/test_vm_tiers.py", "vm/test_vm_access_matrix.py",
}  # fmt: skip
TESTS = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") or not any(item.get_closest_marker(m) for m in SLOW_MARKS):
            continue
        rel = item.path.relative_to(TESTS).as_posix()
        item.add_marker(pytest.mark.xdist_group("host-shared" if rel in HOST_SHARED else rel))

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
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from common import numalab
from hypothesis import settings
from suite_units import work_unit

from lab.paths import file_lock

for _tier in ("unit", "vm", "kernel", "libvirt"):
    sys.path.insert(0, str(Path(__file__).parent / _tier))

settings.register_profile("ci", derandomize=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# The slow pass runs two tests at a time (pytest-xdist --dist loadfile, the Makefile's VM_JOBS): a module's
# tests stay on one worker, so a module fixture's boot or build happens once. The modules that start this host's
# libvirtd or act as its ordinary user take the ``host_shared`` lock for their whole module (pytestmark), so
# they never run beside each other. A test whose figures or bounds are the host's own time is marked ``alone``
# and runs in the last pass, by itself. (Not --dist loadgroup: under pytest 9 xdist 3.8's group suffix on the
# node id is lost, checked 2026-11-26, and every test was sent on its own.)
HOST_SHARED_LOCK = Path(tempfile.gettempdir()) / "numalab-tests-host-shared.lock"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under --dist loadfile, the modules tests/suite_units.py groups are one work unit each, run in turn by one
    worker. As separate units, xdist handed them to both workers (two units ahead each), and a worker that had one
    queued waited on the lock while the other held it: 173 s for test_vm_access_matrix behind the nested tier in one
    rehearsal, with nothing else to do. The locks stay, for any other way the tests are run."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedUnits(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(super()._split_scope(nodeid))

    return GroupedUnits(config, log)


@pytest.fixture(scope="module")
def host_shared() -> Iterator[None]:
    """This host's libvirtd and its test user, held for the module by this worker (waits for the other)."""
    with file_lock(HOST_SHARED_LOCK):
        yield


@pytest.fixture(scope="session")
def built_kernel() -> tuple[str, str]:
    """``--kernel baseline``, built once (a cache hit when the cache is warm; on a cold one, built here under the
    source's lock, or waited for while another worker builds it). For VM tests whose subject is not the kernel: it
    boots in about 1.4 s of TCG where the stock kernel, with its hundreds of initcalls, takes about 4 s, and under the
    remote-latency model 14 s of host time against 24 (docs/benchmarks.md, "The test suite")."""
    proc = numalab("kernel", "build", "--name", "baseline", "--quiet", timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return ("--kernel", "baseline")

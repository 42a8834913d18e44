"""How the slow pass groups test modules into xdist work units (tests/conftest.py's scheduler): a plain module,
not conftest, so that a test can import it (``import conftest`` finds whichever tier's conftest.py is first on
sys.path).

Under --dist loadfile each module is a unit of its own, and xdist hands each worker two units ahead. Modules that
wait on one another belong in one unit, run in turn by one worker, so that the other worker never sits on a lock
with a module it cannot start: those that hold the ``host_shared`` lock (this host's libvirtd and test user), and
those that need the suite's one 6.12 kernel (tests/kernel/conftest.py's ``v612``, built under a lock: on a cold
cache, 20 minutes that a second worker would spend waiting)."""

from __future__ import annotations

# tests/unit/test_suite_layout.py checks each list against the modules' sources.
HOST_SHARED_MODULES = frozenset({
    "tests/kernel/test_ordinary_user.py",
    "tests/libvirt/test_libvirt_backend.py",
    "tests/nested/test_nested.py",
    "tests/vm/test_vm_access_matrix.py",
    "tests/vm/test_vm_tiers.py",
})  # fmt: skip
V612_MODULES = frozenset({"tests/kernel/test_kernel_612.py", "tests/kernel/test_sched_ext.py"})

UNITS = {"host_shared": HOST_SHARED_MODULES, "v612": V612_MODULES}


def work_unit(module: str) -> str:
    """The xdist work unit of a test module (its path from the repository's root) under --dist loadfile."""
    return next((unit for unit, modules in UNITS.items() if module in modules), module)

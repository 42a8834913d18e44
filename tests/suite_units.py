"""How the slow pass groups test modules into xdist work units (tests/conftest.py's scheduler): a plain module,
not conftest, so that a test can import it (``import conftest`` finds whichever tier's conftest.py is first on
sys.path)."""

from __future__ import annotations

# The modules that use ``host_shared`` (tests/unit/test_suite_layout.py checks this list against their sources).
HOST_SHARED_MODULES = frozenset({
    "tests/kernel/test_ordinary_user.py",
    "tests/libvirt/test_libvirt_backend.py",
    "tests/nested/test_nested.py",
    "tests/vm/test_vm_access_matrix.py",
    "tests/vm/test_vm_tiers.py",
})  # fmt: skip


def host_shared_scope(module: str) -> str:
    """The xdist work unit of a test module under --dist loadfile: its own file, or one unit for all of
    HOST_SHARED_MODULES."""
    return "host_shared" if module in HOST_SHARED_MODULES else module

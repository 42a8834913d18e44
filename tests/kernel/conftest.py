"""The kernel tier's shared fixtures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab, require_setup_package
from kernel_repos import kernel_repo as kernel_repo_at

from lab.paths import cache_dir, file_lock

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
TAG = "v6.1-debian"


@pytest.fixture(scope="session")
def kernel_repo(built_kernel) -> Path:
    """Debian's 6.1 source as a git repository with a tag (``v6.1-debian``): a developer's clone, without the
    network. Made once per machine in the cache (about a minute: tar, git add, git commit).

    After the tarball's own kernel (``built_kernel``): the tag holds the tarball's very files, so on a cold machine
    the repository's kernels share the tarball's private tree and warm build directory (lab.kernel.source), and
    their first build is incremental; made before it, the repository had a tree and a full build of its own (a
    ccache-hit build of every object, 2.5 CPU-minutes, and the tree's copy, 0.7)."""
    require_setup_package(TARBALL.is_file(), str(TARBALL), "linux-source-6.1")
    return kernel_repo_at("linux-6.1-git", TARBALL, TAG)


SOURCE_612 = Path("/usr/src/linux-source-6.12.tar.xz")
V612_ARGS = ("kernel", "build", "--json", "--source", str(SOURCE_612), "--fragment", "sched-ext", "--name", "v6.12")


@pytest.fixture(scope="session")
def v612() -> dict:
    """The suite's one 6.12 kernel, ``v6.12``: Debian's linux-source-6.12 with numalab's default fragments and
    sched-ext (its example schedulers built with it), built once (cold: about 25 minutes on this shared 2-core
    machine, docs/sched-ext.md) or found in the cache; ``kernel build --json``'s answer. tests/kernel/test_kernel_612.py
    and test_sched_ext.py share it (a file lock: two workers on a cold cache build it once)."""
    require_setup_package(SOURCE_612.is_file(), str(SOURCE_612), "linux-source-6.12")
    with file_lock(cache_dir("test-trees") / ".v6.12-build.lock"):
        proc = numalab(*V612_ARGS, timeout=5400)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def kernel_repo_612(v612) -> Path:
    """Debian's 6.12 source as a git repository tagged ``v6.12-debian`` (as :func:`kernel_repo` for 6.1): for
    ``numalab ab TREE --base REV --scheduler`` (tests/kernel/test_sched_ext.py). Made once per machine, after
    ``v6.12``, whose private tree its kernels share (as :func:`kernel_repo`'s share the 6.1 tarball's)."""
    require_setup_package(SOURCE_612.is_file(), str(SOURCE_612), "linux-source-6.12")
    return kernel_repo_at("linux-6.12-git", SOURCE_612, "v6.12-debian")


V73_ARGS = ("kernel", "build", "--json", "--source", "debian:7.3", "--name", "v7.3")


@pytest.fixture(scope="session")
def v73() -> dict:
    """The suite's one 7.x kernel, ``v7.3``: Debian's linux-source-7.3 (trixie-backports, fetched by numalab with
    its private apt lists: ``--source debian:7.3``) with numalab's default fragments, cache-aware scheduling
    (SCHED_CACHE) among them; built once (cold: about 6 minutes on this 2-core machine) or found in the cache;
    ``kernel build --json``'s answer."""
    with file_lock(cache_dir("test-trees") / ".v7.3-build.lock"):
        proc = numalab(*V73_ARGS, timeout=3600)
    assert proc.returncode == 0, proc.stderr[-3000:] + proc.stdout[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def kernel_repo_73(v73) -> Path:
    """Debian's 7.3 source as a git repository tagged ``v7.3-debian`` (as :func:`kernel_repo` for 6.1): a 7.x tree for
    ``numalab ab``. Made once per machine, after ``v7.3``, whose private tree and warm build directory its kernels
    share (the same files)."""
    return kernel_repo_at("linux-7.3-git", Path(v73["source"]["location"]), "v7.3-debian")

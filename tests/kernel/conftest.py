"""The kernel tier's shared fixtures."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from common import numalab, require_setup_package

from lab.paths import cache_dir, file_lock

TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
TAG = "v6.1-debian"
# Fixed, so the repository (and so its commit, the build keys and the warm build directories) is the same on
# every CI run of a machine.
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}  # fmt: skip


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture(scope="session")
def kernel_repo(built_kernel) -> Path:
    """Debian's 6.1 source as a git repository with a tag (``v6.1-debian``): a developer's clone, without the
    network. Made once per machine in the cache (about a minute: tar, git add, git commit).

    After the tarball's own kernel (``built_kernel``): the tag holds the tarball's very files, so on a cold machine
    the repository's kernels share the tarball's private tree and warm build directory (lab.kernel.source), and
    their first build is incremental; made before it, the repository had a tree and a full build of its own (a
    ccache-hit build of every object, 2.5 CPU-minutes, and the tree's copy, 0.7)."""
    require_setup_package(TARBALL.is_file(), str(TARBALL), "linux-source-6.1")
    repo = cache_dir("test-trees") / "linux-6.1-git"
    with file_lock(repo.parent / ".linux-6.1-git.lock"):  # (two test workers on a cold cache: one makes it)
        if not (repo / ".git" / "numalab-test-ready").is_file():
            _make_kernel_repo(repo)
    return repo


def _make_kernel_repo(repo: Path, tarball: Path = TARBALL, tag: str = TAG) -> None:
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(repo), "--strip-components=1"], check=True)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A", "-f", ".")
    _git(repo, "commit", "-q", "--no-verify", "-m", f"Debian {tarball.name.removesuffix('.tar.xz')}")
    _git(repo, "tag", tag)
    (repo / ".git" / "numalab-test-ready").write_text(_git(repo, "rev-parse", "HEAD"))


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
    repo = cache_dir("test-trees") / "linux-6.12-git"
    with file_lock(repo.parent / ".linux-6.12-git.lock"):
        if not (repo / ".git" / "numalab-test-ready").is_file():
            _make_kernel_repo(repo, SOURCE_612, "v6.12-debian")
    return repo


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
    tarball = Path(v73["source"]["location"])
    repo = cache_dir("test-trees") / "linux-7.3-git"
    with file_lock(repo.parent / ".linux-7.3-git.lock"):
        if not (repo / ".git" / "numalab-test-ready").is_file():
            _make_kernel_repo(repo, tarball, "v7.3-debian")
    return repo

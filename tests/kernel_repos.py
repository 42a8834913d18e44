"""Debian's kernel sources as git repositories with a tag: a developer's clone, without the network, for
``numalab ab TREE --base TAG`` (tests/kernel, tests/scx). Made once per machine in numalab's cache."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lab.paths import cache_dir, file_lock

# Fixed, so the repository (and so its commit, the build keys and the warm build directories) is the same on
# every CI run of a machine.
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}  # fmt: skip


def git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def make_kernel_repo(repo: Path, tarball: Path, tag: str) -> None:
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    subprocess.run(["tar", "-xf", str(tarball), "-C", str(repo), "--strip-components=1"], check=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A", "-f", ".")
    git(repo, "commit", "-q", "--no-verify", "-m", f"Debian {tarball.name.removesuffix('.tar.xz')}")
    git(repo, "tag", tag)
    (repo / ".git" / "numalab-test-ready").write_text(git(repo, "rev-parse", "HEAD"))


def kernel_repo(name: str, tarball: Path, tag: str) -> Path:
    """The repository ``<cache>/test-trees/NAME`` of ``tarball`` tagged ``tag``, made if it is not there (a file
    lock: two test workers on a cold cache make it once)."""
    repo = cache_dir("test-trees") / name
    with file_lock(repo.parent / f".{name}.lock"):
        if not (repo / ".git" / "numalab-test-ready").is_file():
            make_kernel_repo(repo, tarball, tag)
    return repo

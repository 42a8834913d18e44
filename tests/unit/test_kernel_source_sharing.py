"""A git source whose commit holds exactly the files of a private tree already made shares that tree and its warm
build directories (lab.kernel.source): a git tree made from the tarball, a second commit with the same files. With
real git and tar, on a small tree of a kernel's shape (the kernel tier builds the real ones)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from lab.kernel.cache import prunable, prune
from lab.kernel.source import prepare_tree, resolve_source, source_root

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}


def _git(repo: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def _files(top: Path, fair: str = "int fair;\n") -> Path:
    (top / "kernel" / "sched").mkdir(parents=True)
    (top / "Makefile").write_text("all:\n")
    (top / "Kconfig").write_text("config X\n\tbool\n")
    (top / "kernel" / "sched" / "fair.c").write_text(fair)
    (top / "scripts").mkdir()
    (top / "scripts" / "run.sh").write_text("#!/bin/sh\n")
    (top / "scripts" / "run.sh").chmod(0o755)
    return top


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def tarball(tmp_path) -> Path:
    top = _files(tmp_path / "linux-x")
    path = tmp_path / "linux-x.tar.xz"
    with tarfile.open(path, "w:xz") as tar:
        tar.add(top, arcname="linux-x")
    return path


def _repo(tmp_path: Path, name: str = "repo", fair: str = "int fair;\n") -> Path:
    repo = _files(tmp_path / name, fair)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A", "-f", ".")
    _git(repo, "commit", "-q", "-m", "the tarball's files")
    return repo


def test_a_git_tree_of_the_tarballs_files_builds_in_the_tarballs_private_tree(cache, tarball, tmp_path) -> None:
    tar = resolve_source(str(tarball))
    made = prepare_tree(tar, lambda _m: None)
    git = resolve_source(f"{_repo(tmp_path)}@HEAD")
    assert git.content and git.key != tar.key and git.identity.startswith("git:")
    assert source_root(git) == source_root(tar)  # the same tree, so the same lock and build directories
    said: list[str] = []
    assert prepare_tree(git, said.append) == made
    assert any("the same files as the private tree" in m for m in said), said
    assert not (cache / "kernels" / "src" / git.key).exists()  # no tree of its own was made


def test_other_files_or_a_tree_of_its_own_are_not_shared(cache, tarball, tmp_path) -> None:
    tar = resolve_source(str(tarball))
    prepare_tree(tar, lambda _m: None)
    repo = _repo(tmp_path, "edited", fair="int fair = 1;\n")
    edited = resolve_source(f"{repo}@HEAD")
    assert source_root(edited) != source_root(tar) and source_root(edited).name == edited.key
    assert prepare_tree(edited, lambda _m: None).joinpath("kernel/sched/fair.c").read_text() == "int fair = 1;\n"
    # A mode is part of the files: the same bytes without the script's x bit are another tree.
    repo = _repo(tmp_path, "modes")
    (repo / "scripts" / "run.sh").chmod(0o644)
    _git(repo, "commit", "-q", "-a", "-m", "no x bit")
    assert source_root(resolve_source(f"{repo}@HEAD")) != source_root(tar)


def test_a_second_commit_of_the_same_files_shares_the_first_git_sources_tree(cache, tarball, tmp_path) -> None:
    repo = _repo(tmp_path)
    first = resolve_source(f"{repo}@HEAD")
    made = prepare_tree(first, lambda _m: None)  # before any tarball: its own tree, named in the index
    assert made.parent.name == first.key
    _git(repo, "commit", "-q", "--allow-empty", "-m", "nothing changed")
    second = resolve_source(f"{repo}@HEAD")
    assert second.rev != first.rev and second.content == first.content
    assert prepare_tree(second, lambda _m: None) == made
    # A tarball is always its own source: its files are known only once unpacked.
    tar = resolve_source(str(tarball))
    assert source_root(tar).name == tar.key


def test_a_pruned_tree_is_not_shared_and_the_next_one_is(cache, tarball, tmp_path) -> None:
    tar = resolve_source(str(tarball))
    prepare_tree(tar, lambda _m: None)
    prune([item for item in prunable(sources=True) if item["what"] == "source tree"])
    git = resolve_source(f"{_repo(tmp_path)}@HEAD")
    assert source_root(git).name == git.key  # the index names a tree that is gone: checked, not trusted
    prepare_tree(git, lambda _m: None)
    assert source_root(tar).name == tar.key
    shutil.rmtree(source_root(tar))  # (the tarball's own tree was never made again)
    other = _repo(tmp_path, "clone")
    _git(other, "commit", "-q", "--allow-empty", "-m", "another commit, same files")
    assert source_root(resolve_source(f"{other}@HEAD")).name == git.key  # the index names the git source's now

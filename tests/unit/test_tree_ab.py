"""numalab ab's two builds from a git tree (lab.kernel.tree_ab), on a small repository: what each side is, the one-line
refusals, and that the tree is only read (git status, the index and every file's mtime unchanged)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.kernel.tree_ab import TreeAB, tree_builds


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True, text=True).stdout  # fmt: skip


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    r = tmp_path / "linux"
    (r / "kernel" / "sched").mkdir(parents=True)
    (r / "Makefile").write_text("all:\n")
    (r / "kernel" / "sched" / "fair.c").write_text("".join(f"int x{i} = {i};\n" for i in range(50)))
    _git(r, "init", "-q", "-b", "master")
    _git(r, "add", "-A")
    _git(r, "commit", "-qm", "base")
    _git(r, "tag", "v6.99")
    _git(r, "checkout", "-q", "-b", "my-fix")
    for i in (1, 2):
        fair = r / "kernel" / "sched" / "fair.c"
        fair.write_text(fair.read_text().replace(f"int x{i} = {i};", f"int x{i} = {i * 10};"))
        _git(r, "commit", "-qam", f"sched/numa: change {i}")
    return r


def _state(repo: Path) -> tuple:
    """Everything a write would change: git's view (asked without refreshing the index), and every file's
    mtime and size, .git's included."""
    status = subprocess.run(["git", "--no-optional-locks", "status", "--porcelain"], cwd=repo, check=True,
                            capture_output=True, text=True).stdout  # fmt: skip
    return status, sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in repo.rglob("*") if p.is_file())


def test_a_branch_on_a_tag_is_baseline_and_patched(repo) -> None:
    before = _state(repo)
    builds = tree_builds(TreeAB(repo, "v6.99"))
    base = _git(repo, "rev-parse", "v6.99").strip()
    assert builds.baseline.source.rev == base and not builds.baseline.patches
    assert builds.patched.source.rev == base and len(builds.patched.patches) == 2
    assert builds.baseline.name == f"ab-{base[:12]}" and builds.patched.name.startswith(f"ab-{base[:12]}-")
    assert any("2 commit(s)" in n for n in builds.notes)
    # The same request twice gives the same builds (so both kernels are cache hits the second time).
    assert tree_builds(TreeAB(repo, "v6.99")).patched.name == builds.patched.name
    assert _state(repo) == before


def test_uncommitted_edits_are_refused_or_included_as_said(repo) -> None:
    fair = repo / "kernel" / "sched" / "fair.c"
    fair.write_text(fair.read_text() + "int extra;\n")
    before = _state(repo)
    with pytest.raises(LabError, match=r"1 file\(s\) with uncommitted changes \(e.g. kernel/sched/fair.c\)"):
        tree_builds(TreeAB(repo, "v6.99"))
    builds = tree_builds(TreeAB(repo, "v6.99", include_uncommitted=True))
    assert len(builds.patched.patches) == 3 and "int extra;" in Path(builds.patched.patches[-1].name).read_text()
    assert any("uncommitted edits to 1 file(s)" in n for n in builds.notes)
    assert _state(repo) == before
    (repo / "untracked.txt").write_text("not a change\n")  # untracked files are never part of the patch
    assert len(tree_builds(TreeAB(repo, "v6.99", include_uncommitted=True)).patched.patches) == 3


def test_patch_files_instead_of_commits(repo, tmp_path) -> None:
    patch = tmp_path / "0001-x.patch"
    patch.write_text(_git(repo, "format-patch", "--stdout", "-1", "HEAD"))
    builds = tree_builds(TreeAB(repo, "master", patches=(str(patch),)))
    assert [Path(p.name).name for p in builds.patched.patches] == ["0001-x.patch"]
    with pytest.raises(LabError, match="--head: give either commits"):
        tree_builds(TreeAB(repo, "master", head="my-fix", patches=(str(patch),)))


@pytest.mark.parametrize(
    ("ab", "message"),
    [
        (lambda r: TreeAB(r, "my-fix"), "--base my-fix: it is the tree's HEAD and nothing else was given"),
        (lambda r: TreeAB(r, "nope"), "--base nope: not a commit of"),
        (lambda r: TreeAB(r, "v6.99", head="nope"), "--head nope: not a commit of"),
        (lambda r: TreeAB(r, "my-fix", head="v6.99"), "--base my-fix: not an ancestor of --head v6.99"),
        (lambda r: TreeAB(r.parent, "v6.99"), "not a git tree"),
    ],
)
def test_one_line_refusals(repo, ab, message) -> None:
    with pytest.raises(LabError, match=message.replace("(", r"\(").replace(")", r"\)")):
        tree_builds(ab(repo))


def test_git_reads_take_no_index_lock(repo) -> None:
    """git status would refresh (write) the index of a tree whose files were touched; numalab's does not."""
    fair = repo / "kernel" / "sched" / "fair.c"
    os.utime(fair, None)  # same content, new mtime: a stat-dirty index entry
    index = repo / ".git" / "index"
    before = index.stat().st_mtime_ns, index.read_bytes()
    tree_builds(TreeAB(repo, "v6.99"))
    assert (index.stat().st_mtime_ns, index.read_bytes()) == before

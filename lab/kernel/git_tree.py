"""A developer's kernel git tree, read and never written: commits, a range as a series, uncommitted edits.

A range ``good..bad`` (linear history only) is written as a quilt series of ``git format-patch`` mails
(applied with ``git am``) outside the tree, so a kernel of ``GIT@good`` plus the first k commits is an
incremental rebuild of one private source tree (a source per commit would make every build a cold one):
``numalab bisect --good/--bad`` bisects such a series, ``numalab ab`` builds its base and its tip.

Every git command here only reads: ``GIT_OPTIONAL_LOCKS=0`` keeps even ``git status`` from refreshing the
index, and format-patch writes into numalab's own directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lab.errors import LabError
from lab.paths import TOOL_TEXT


def _git(repo: Path, *args: str, raw: bool = False) -> subprocess.CompletedProcess:
    """git in ``repo``; its output as text (a byte that is not UTF-8, as in a file's name, kept as a surrogate
    escape: lab.paths.TOOL_TEXT), or as bytes with ``raw`` (a diff, which must reach its patch byte for byte)."""
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, env=env, **({} if raw else TOOL_TEXT))


def is_git_tree(repo: Path) -> bool:
    return repo.is_dir() and _git(repo, "rev-parse", "--git-dir").returncode == 0


def commit_of(repo: Path, rev: str, option: str) -> str:
    """The full id of the commit ``rev`` names, or a one-line error naming ``option``."""
    return _commit(repo, rev, option)


def _commit(repo: Path, rev: str, option: str) -> str:
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if proc.returncode != 0:
        raise LabError(f"{option} {rev}: not a commit of {repo}")
    return proc.stdout.strip()


def range_series(
    source: str | None, good: str, bad: str, dest: Path, options: tuple[str, str] = ("--good", "--bad")
) -> tuple[Path, str]:
    """The range as a series in ``dest`` (made once; an existing one is kept, for a resume) and the good
    commit's full id. One-line errors name the options (``options``: how the caller calls good and bad)."""
    og, ob = options
    both = f"{og}/{ob}"
    dest = Path(os.path.abspath(dest))  # (git runs in the repository: a relative -o would write into the user's tree)
    if not source:
        raise LabError(f"{both}: give the git repository as --source")
    repo = Path(source).expanduser()
    if not repo.is_dir() or _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise LabError(f"--source {source}: {both} need a local git repository")
    g, b = _commit(repo, good, og), _commit(repo, bad, ob)
    if _git(repo, "merge-base", "--is-ancestor", g, b).returncode != 0:
        raise LabError(f"{og} {good}: not an ancestor of {ob} {bad}")
    if _git(repo, "rev-list", "--merges", f"{g}..{b}").stdout.strip():
        raise LabError(f"{both}: {good}..{bad} has merge commits; give a linear range")
    commits = _git(repo, "rev-list", "--reverse", f"{g}..{b}").stdout.split()
    if not commits:
        raise LabError(f"{both}: {good}..{bad} has no commits")
    if (dest / "series").is_file():
        return dest, g
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = _git(repo, "format-patch", "--quiet", "--no-stat", "--zero-commit", "-o", str(tmp), f"{g}..{b}")
    names = sorted(p.name for p in tmp.glob("*.patch")) if proc.returncode == 0 else []
    if len(names) != len(commits):
        raise LabError(f"{both}: git format-patch {good}..{bad} failed: {proc.stderr.strip()[-200:]}")
    (tmp / "series").write_text("".join(f"{n}\n" for n in names))
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(tmp, dest)
    return dest, g


def uncommitted(repo: Path) -> list[str]:
    """The tracked files whose content differs from HEAD (staged or not); untracked files are not a change."""
    proc = _git(repo, "status", "--porcelain", "--untracked-files=no")
    if proc.returncode != 0:
        raise LabError(f"{repo}: git status failed: {proc.stderr.strip()[-200:]}")
    return [ln[3:] for ln in proc.stdout.splitlines() if ln.strip()]


def uncommitted_patch(repo: Path, dest: Path) -> Path:
    """The tree's uncommitted edits against HEAD as one patch file at ``dest`` (binary-safe, full index), byte for
    byte what git wrote (an edit need not be UTF-8)."""
    proc = _git(repo, "diff", "--binary", "--full-index", "HEAD", raw=True)
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="backslashreplace").strip()
        raise LabError(f"{repo}: git diff HEAD failed: {err[-200:]}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(proc.stdout)
    return dest

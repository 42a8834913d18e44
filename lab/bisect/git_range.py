"""``numalab bisect --good REV --bad REV``: a commit range of a local git source, bisected as a series.

The range ``good..bad`` (linear history only) is written as a quilt series of ``git format-patch`` mails
(applied with ``git am``), and prefix k is ``GIT@good`` with the first k commits: the same search and the
same kernel cache as a series, and every prefix an incremental rebuild of one source tree (a source per
commit would make every step a cold build).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from lab.errors import LabError


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LC_ALL": "C"}
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)


def _commit(repo: Path, rev: str, option: str) -> str:
    proc = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if proc.returncode != 0:
        raise LabError(f"{option} {rev}: not a commit of {repo}")
    return proc.stdout.strip()


def range_series(source: str | None, good: str, bad: str, dest: Path) -> tuple[Path, str]:
    """The range as a series in ``dest`` (made once; an existing one is kept, for a resume) and the good
    commit's full id. One-line errors name the option."""
    if not source:
        raise LabError("--good/--bad: give the git repository as --source")
    repo = Path(source).expanduser()
    if not repo.is_dir() or _git(repo, "rev-parse", "--git-dir").returncode != 0:
        raise LabError(f"--source {source}: --good/--bad need a local git repository")
    g, b = _commit(repo, good, "--good"), _commit(repo, bad, "--bad")
    if _git(repo, "merge-base", "--is-ancestor", g, b).returncode != 0:
        raise LabError(f"--good {good}: not an ancestor of --bad {bad}")
    if _git(repo, "rev-list", "--merges", f"{g}..{b}").stdout.strip():
        raise LabError(f"--good/--bad: {good}..{bad} has merge commits; bisect a linear range")
    commits = _git(repo, "rev-list", "--reverse", f"{g}..{b}").stdout.split()
    if not commits:
        raise LabError(f"--good/--bad: {good}..{bad} has no commits")
    if (dest / "series").is_file():
        return dest, g
    tmp = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    proc = _git(repo, "format-patch", "--quiet", "--no-stat", "--zero-commit", "-o", str(tmp), f"{g}..{b}")
    names = sorted(p.name for p in tmp.glob("*.patch")) if proc.returncode == 0 else []
    if len(names) != len(commits):
        raise LabError(f"--good/--bad: git format-patch {good}..{bad} failed: {proc.stderr.strip()[-200:]}")
    (tmp / "series").write_text("".join(f"{n}\n" for n in names))
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.rename(tmp, dest)
    return dest, g

"""``numalab ab TREE --base REV``: your kernel tree and your patch, to an A/B verdict in one command.

The baseline is ``TREE@base``; the patched kernel is the same source with the commits ``base..head`` as a
series (``git format-patch``, outside the tree), or with ``--patch``/``--series`` files instead. Both are
built in one private copy of the source (the second build is incremental), cached by their content, and
booted A B A B as ``numalab run --kernel A --kernel B`` would. The tree is only read: no checkout, no stash,
no index refresh. Uncommitted edits to tracked files are refused unless ``--include-uncommitted`` makes them
a last patch (said so); untracked files are never a change.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.kernel.build import BuildInputs, BuildRequest, BuildResult, build_kernel, check_patches, make_request
from lab.kernel.git_tree import commit_of, is_git_tree, range_series, uncommitted, uncommitted_patch
from lab.paths import cache_dir

Progress = Callable[[str], None]


@dataclass(frozen=True)
class TreeAB:
    tree: Path
    base: str
    head: str | None = None  # default HEAD (when no --patch/--series)
    patches: tuple[str, ...] = ()
    series: str | None = None
    include_uncommitted: bool = False
    fragments: tuple[str, ...] = ()
    jobs: int = 0


@dataclass(frozen=True)
class TreeBuilds:
    """The two builds of a tree A/B: the baseline's request and the patched kernel's."""

    baseline: BuildRequest
    patched: BuildRequest
    notes: tuple[str, ...]  # what the A/B is of, in words (printed before the builds)


def _patches_of(ab: TreeAB, repo: Path, base: str, notes: list[str]) -> tuple[list[str], str | None]:
    """The patched side's (patch files, series): the range base..head as a series, or the given files."""
    if ab.patches or ab.series:
        if ab.head:
            raise LabError("--head: give either commits (--head) or patch files (--patch/--series), not both")
        notes.append(f"patched: {' '.join([*([ab.series] if ab.series else []), *ab.patches])} on {base[:12]}")
        return list(ab.patches), ab.series
    head = commit_of(repo, ab.head or "HEAD", "--head")
    if head == base:
        return [], None
    dest = cache_dir("ab", "series") / f"{base[:12]}..{head[:12]}"
    series, _ = range_series(str(repo), ab.base, ab.head or "HEAD", dest, ("--base", "--head"))
    n = len((series / "series").read_text().split())
    notes.append(f"patched: {ab.head or 'HEAD'} ({head[:12]}), {n} commit(s) on the base")
    return [], str(series)


def _uncommitted(ab: TreeAB, repo: Path, notes: list[str]) -> list[str]:
    """The tree's uncommitted edits as one more patch file (in numalab's cache), or a one-line refusal."""
    dirty = uncommitted(repo)
    if not dirty:
        return []
    if not ab.include_uncommitted:
        raise LabError(f"{ab.tree}: {len(dirty)} file(s) with uncommitted changes (e.g. {dirty[0]}): commit them, "
                       "or --include-uncommitted to add them as a last patch")  # fmt: skip
    if ab.head and commit_of(repo, ab.head, "--head") != commit_of(repo, "HEAD", "--head"):
        raise LabError("--include-uncommitted: the edits are against HEAD, so --head must be HEAD")
    pending = uncommitted_patch(repo, cache_dir("ab", "uncommitted") / f".pending-{os.getpid()}.patch")
    named = pending.with_name(f"uncommitted-{hashlib.sha256(pending.read_bytes()).hexdigest()[:10]}.patch")
    os.replace(pending, named)
    notes.append(f"included: uncommitted edits to {len(dirty)} file(s) as a last patch ({named})")
    return [str(named)]


def tree_builds(ab: TreeAB) -> TreeBuilds:
    """The two build requests of a tree A/B, every input checked first (one-line errors)."""
    repo = ab.tree.expanduser()
    if not is_git_tree(repo):
        raise LabError(f"{ab.tree}: not a git tree (numalab ab starts from your kernel's git clone)")
    base = commit_of(repo, ab.base, "--base")
    notes = [f"baseline: {ab.base} ({base[:12]}) of {repo}"]
    patches, series = _patches_of(ab, repo, base, notes)
    patches += _uncommitted(ab, repo, notes)
    if not patches and not series:
        raise LabError(f"--base {ab.base}: it is the tree's HEAD and nothing else was given: no patch to compare")
    source = f"{repo}@{base}"
    frags = list(ab.fragments)
    scx = "-scx" if "sched-ext" in frags else ""  # (its own names: the same base without sched_ext is another build)
    scx += "-crates" if "scx" in frags else ""  # (and with scx.config, for the scx project's schedulers, another)
    baseline = make_request(BuildInputs(source, None, None, frags), f"ab-{base[:12]}{scx}", ab.jobs)
    patched = make_request(BuildInputs(source, patches, series, frags), None, ab.jobs)
    digest = hashlib.sha256("".join(p.sha256() for p in patched.patches).encode()).hexdigest()[:10]
    patched.name = f"ab-{base[:12]}-{digest}{scx}"
    return TreeBuilds(baseline, patched, tuple(notes))


def build_pair(builds: TreeBuilds, progress: Progress) -> tuple[BuildResult, BuildResult]:
    """Both kernels, built (or found in the cache), each said as it starts and ends; the patched side's patches
    checked first, so one that does not apply is said before the baseline's build, not after it."""
    check_patches(builds.patched, progress)
    out = []
    for side, req in (("baseline", builds.baseline), ("patched", builds.patched)):
        progress(f"{side} kernel {req.name}: building (or from the cache)")
        res = build_kernel(req, progress)
        how = "cache hit" if res.cached else f"built in {res.seconds:.0f}s"
        progress(f"{side} kernel {res.name}: {how}, build-id {str(res.meta.get('build_id'))[:16]}")
        out.append(res)
    if out[0].meta.get("build_id") == out[1].meta.get("build_id"):
        same = str(out[0].meta.get("build_id"))[:16]
        raise LabError(f"the baseline and the patched kernel are the same binary (build-id {same}): "
                       "the patch changes nothing that is built")  # fmt: skip
    return out[0], out[1]

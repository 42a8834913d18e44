"""Kernel sources: what ``--source`` names, its identity, and a private git tree of it.

A source is Debian's ``linux-source-6.1`` tarball (the default), any other
tarball, a directory, ``GIT-PATH-or-URL@REV``, or ``debian:X.Y``: Debian's
``linux-source-X.Y`` fetched with apt (:mod:`lab.kernel.debian_source`), a tarball
source with its Debian package and version in the record. Each gets an identity (the
tarball's hash, the commit, a fingerprint of the directory) and, once, a
private tree under ``<cache>/kernels/src/<id>/tree``: a git repository whose
``HEAD`` at creation is the pristine source. Builds reset that tree and apply
their patches to it, so the user's own tree is never touched and one O= build
directory per (source, fragments) stays warm for incremental rebuilds.

A git source whose commit holds exactly the files of a private tree already made
(a git tree made from the tarball, a second clone at the same commit) shares that
tree and its warm build directories: ``<cache>/kernels/trees-by-content/<git tree
id>`` names the private tree of each content. Its kernels keep their own identity
and cache key; only the sources' copy and the objects are shared (the first build
of such a source is incremental, not a full one).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.kernel.debian_source import fetch as fetch_debian
from lab.kernel.debian_source import is_debian_spec
from lab.paths import TOOL_TEXT, cache_dir, cache_root, json_text, write_text_atomic

DEFAULT_TARBALL = Path("/usr/src/linux-source-6.1.tar.xz")
BASE_REF = "refs/numalab/base"
GIT_ID = ["-c", "user.name=numalab", "-c", "user.email=numalab@localhost"]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Source:
    kind: str  # tarball | dir | git
    spec: str  # as given (or the default tarball's path)
    location: str  # resolved path or URL
    identity: str  # kind:hash — part of the build cache key
    rev: str = ""  # git: the commit
    content: str = ""  # git: the commit's tree object (its files); a private tree of the very same files is shared
    debian: tuple[str, str, str] = ()  # debian:X.Y: (package, version, suite) of the tarball apt fetched

    @property
    def key(self) -> str:
        return hashlib.sha256(self.identity.encode(errors="surrogateescape")).hexdigest()[:16]  # (a path: any bytes)

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "spec": self.spec, "location": self.location, "identity": self.identity}
        if self.debian:
            out["debian"] = dict(zip(("package", "version", "suite"), self.debian))
        return out


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["git", *GIT_ID, *args], cwd=cwd, capture_output=True, **TOOL_TEXT)
    if check and proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["failed"])[-1]
        raise LabError(f"git {args[0]}: {err}")
    return proc


def _file_sha256(path: Path) -> str:
    """sha256 of a (large) file, remembered by (path, size, mtime) so a cache hit stays fast."""
    st = path.stat()
    memo = cache_dir("kernels") / "source-hashes.json"
    try:
        known = json.loads(memo.read_text())
    except (OSError, ValueError):
        known = {}
    stamp = f"{path.resolve()}:{st.st_size}:{st.st_mtime_ns}"
    if stamp in known:
        return known[stamp]
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    known[stamp] = h.hexdigest()
    write_text_atomic(memo, json_text(known, indent=1))
    return known[stamp]


def _dir_fingerprint(path: Path) -> str:
    """Names, sizes and mtimes of every file (not .git): cheap, and changes with any edit."""
    h = hashlib.sha256()
    for root, dirs, files in os.walk(path):
        dirs[:] = sorted(d for d in dirs if d != ".git")
        for name in sorted(files):
            p = os.path.join(root, name)
            try:
                st = os.lstat(p)
            except OSError:
                continue
            h.update(f"{os.path.relpath(p, path)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode(errors="surrogateescape"))
    return h.hexdigest()


def _is_url(s: str) -> bool:
    return "://" in s or (s.count(":") == 1 and "@" in s.split(":")[0] and not Path(s).exists())


def _git_source(spec: str) -> Source:
    where, rev = spec.rsplit("@", 1)
    if not rev:
        raise LabError(f"--source {spec}: empty revision after '@'")
    if _is_url(where):
        mirror = cache_dir("kernels", "git") / hashlib.sha256(where.encode()).hexdigest()[:16]
        if not (mirror / "HEAD").exists():
            _git("clone", "--bare", "--quiet", where, str(mirror))
        _git("fetch", "--quiet", where, rev, cwd=mirror, check=False)
        repo = mirror
    else:
        repo = Path(where).expanduser()
        if not repo.is_dir():
            raise LabError(f"--source {spec}: {where}: no such directory")
        if _git("rev-parse", "--git-dir", cwd=repo, check=False).returncode != 0:
            raise LabError(f"--source {spec}: {where} is not a git repository")
    proc = _git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", cwd=repo, check=False)
    if proc.returncode != 0 and _is_url(where):
        proc = _git("rev-parse", "--verify", "--quiet", "FETCH_HEAD^{commit}", cwd=repo, check=False)
    if proc.returncode != 0:
        raise LabError(f"--source {spec}: no commit '{rev}' in {where}")
    commit = proc.stdout.strip()
    tree = _git("rev-parse", "--verify", "--quiet", f"{commit}^{{tree}}", cwd=repo, check=False).stdout.strip()
    return Source("git", spec, str(repo.resolve()), f"git:{commit}", commit, tree)


def _say(msg: str) -> None:
    print(msg, file=sys.stderr)


def resolve_source(spec: str | None, progress: Progress = _say) -> Source:
    """What a --source names (default: Debian's linux-source-6.1 tarball); ``progress`` hears of a ``debian:X.Y``
    download."""
    if spec is None:
        if not DEFAULT_TARBALL.is_file():
            raise LabError(
                f"--source: the default {DEFAULT_TARBALL} is not installed (apt-get install linux-source-6.1, "
                "or make setup)"
            )
        spec = str(DEFAULT_TARBALL)
    if is_debian_spec(spec):
        got = fetch_debian(spec, progress)
        return Source("tarball", spec, str(got.tarball), f"tar:{_file_sha256(got.tarball)}",
                      debian=(got.package, got.version, got.suite))  # fmt: skip
    path = Path(spec).expanduser()
    if path.is_file():
        return Source("tarball", spec, str(path.resolve()), f"tar:{_file_sha256(path)}")
    if path.is_dir():
        if not (path / "Makefile").is_file() or not (path / "Kconfig").is_file():
            raise LabError(f"--source {spec}: not a kernel source tree (no Makefile and Kconfig)")
        return Source("dir", spec, str(path.resolve()), f"dir:{path.resolve()}:{_dir_fingerprint(path)}")
    if "@" in spec:
        return _git_source(spec)
    raise LabError(f"--source {spec}: no such file or directory (give a tarball, a directory, GIT@REV or debian:X.Y)")


_ROOT_NAME = re.compile(r"[0-9a-f]{16}")
_TREE_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")  # (sha1 or sha256 repositories)


def _content_index() -> Path:
    return cache_dir("kernels", "trees-by-content")


def _ready(root: Path) -> bool:
    return (root / "tree" / ".git" / "numalab-ready").exists()


def _base_tree(tree: Path) -> str:
    return _git("rev-parse", "--verify", "--quiet", f"{BASE_REF}^{{tree}}", cwd=tree, check=False).stdout.strip()


def _root_with_content(content: str) -> Path | None:
    """The private tree whose pristine files are git tree ``content``, if one is ready (checked, not trusted:
    the index may name a tree pruned since)."""
    if not _TREE_ID.fullmatch(content):
        return None
    try:
        name = (_content_index() / content).read_text().strip()
    except OSError:
        return None
    if not _ROOT_NAME.fullmatch(name):
        return None
    root = cache_root() / "kernels" / "src" / name
    return root if _ready(root) and _base_tree(root / "tree") == content else None


def _index_content(root: Path) -> None:
    """Name ``root``'s private tree in the content index, unless a ready tree of the same files is named there."""
    content = _base_tree(root / "tree")
    if _TREE_ID.fullmatch(content) and _root_with_content(content) is None:
        write_text_atomic(_content_index() / content, root.name + "\n")


def source_root(source: Source) -> Path:
    """Where a source's private tree and build directories live: its own, or, for a git source that has none yet,
    the private tree made earlier of the very same files (see the module's docstring)."""
    own = cache_root() / "kernels" / "src" / source.key
    if source.content and not _ready(own):
        shared = _root_with_content(source.content)
        if shared is not None:
            return shared
    own.mkdir(parents=True, exist_ok=True)
    return own


def _kernel_top(d: Path) -> Path:
    if (d / "Makefile").is_file():
        return d
    subs = [p for p in d.iterdir() if p.is_dir()]
    if len(subs) == 1 and (subs[0] / "Makefile").is_file():
        return subs[0]
    raise LabError("--source: not a kernel source tarball (no top-level Makefile)")


def _populate(source: Source, tmp: Path) -> Path:
    """Put a pristine copy of the source in tmp; return the kernel tree inside it."""
    if source.kind == "git":
        # The commit's files, not a clone: a clone --shared would borrow the user's objects, and break when
        # that tree is moved, removed or pruned; a full clone would copy a kernel's whole history.
        top = tmp / "unpack"
        top.mkdir()
        archive = subprocess.Popen(["git", "-C", source.location, "archive", "--format=tar", source.rev],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        tar = subprocess.run(["tar", "-x", "-C", str(top)], stdin=archive.stdout, capture_output=True, **TOOL_TEXT)
        assert archive.stdout is not None and archive.stderr is not None
        archive.stdout.close()
        err = archive.stderr.read().decode(errors="replace")
        archive.stderr.close()
        if archive.wait() != 0 or tar.returncode != 0:
            raise LabError(f"--source {source.spec}: git archive {source.rev[:12]}: "
                           f"{(err or tar.stderr).strip()[-200:] or 'failed'}")  # fmt: skip
    elif source.kind == "tarball":
        unpack = tmp / "unpack"
        unpack.mkdir()
        proc = subprocess.run(["tar", "-xf", source.location, "-C", str(unpack)], capture_output=True, **TOOL_TEXT)
        if proc.returncode != 0:
            raise LabError(f"--source {source.spec}: tar: {(proc.stderr.strip().splitlines() or ['failed'])[-1]}")
        top = _kernel_top(unpack)
    else:
        top = tmp / "unpack"
        shutil.copytree(source.location, top, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        if (top / ".config").exists() or (top / "include" / "config").exists():
            subprocess.run(["make", "-s", "mrproper"], cwd=top, capture_output=True)
    tree = tmp / "tree"
    top.rename(tree)
    # Every file tracked (even the ones the kernel's .gitignore names), cheaply compressed.
    _git("init", "--quiet", cwd=tree)
    _git("config", "core.looseCompression", "1", cwd=tree)
    _git("config", "core.compression", "1", cwd=tree)
    _git("config", "gc.auto", "0", cwd=tree)
    _git("add", "--all", "--force", ".", cwd=tree)
    _git("commit", "--quiet", "--no-verify", "-m", f"numalab base: {source.identity}", cwd=tree)
    _git("update-ref", BASE_REF, "HEAD", cwd=tree)
    return tree


def prepare_tree(source: Source, progress: Progress) -> Path:
    """The private git tree of a source (created once). Callers hold the source lock."""
    root = source_root(source)
    tree = root / "tree"
    if _ready(root):
        if root.name != source.key:
            progress(f"{source.spec}: the same files as the private tree in {root}: building there")
        _index_content(root)  # (a tree made before the index)
        return tree
    progress(f"preparing a private copy of {source.spec} in {root} (once per source)")
    tmp = root / "tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(tree, ignore_errors=True)
    tmp.mkdir()
    made = _populate(source, tmp)
    made.rename(tree)
    shutil.rmtree(tmp, ignore_errors=True)
    (root / "source.json").write_text(json_text(source.to_dict(), indent=2) + "\n")
    (tree / ".git" / "numalab-ready").write_text(source.identity + "\n")
    _index_content(root)
    return tree


def reset_tree(tree: Path) -> None:
    """Back to the pristine source; only files that differ are rewritten (fresh mtimes, so make sees them)."""
    if (tree / ".git" / "rebase-apply").exists():
        _git("am", "--abort", cwd=tree, check=False)
    _git("reset", "--quiet", "--hard", BASE_REF, cwd=tree)
    _git("clean", "-fdxq", cwd=tree)

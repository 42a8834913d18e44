"""Patches for a kernel build: ``--patch FILE`` and quilt-style ``--series``, applied all or nothing.

mbox patches (``git format-patch`` output) go through ``git am``, plain diffs
through ``patch -p1 --fuzz=0`` (as strict as ``git am``: a hunk whose context
moved or changed is a failure, never silently applied somewhere else). A
patch that does not apply is a one-line error naming the patch, the file and
the hunk, and the private tree is reset to the pristine source, so nothing is
left half-applied.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.kernel.source import GIT_ID, reset_tree
from lab.paths import TOOL_TEXT, read_text_file

_MBOX_FROM = re.compile(r"^From \S+ ")
_HEADER = re.compile(r"^[A-Za-z][A-Za-z0-9-]*: ")


@dataclass(frozen=True)
class Patch:
    path: Path
    name: str  # as shown in messages
    data: bytes
    strip: int = 1

    @property
    def kind(self) -> str:
        return "mbox" if is_mbox(self.data) else "diff"

    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def to_dict(self) -> dict:
        return {"name": self.name, "path": str(self.path), "sha256": self.sha256(), "kind": self.kind,
                "strip": self.strip}  # fmt: skip


def is_mbox(data: bytes) -> bool:
    """An mbox (From line) or a mail (headers with From: and Subject: before a blank line)."""
    lines = data.decode("utf-8", "replace").splitlines()
    if lines and _MBOX_FROM.match(lines[0]):
        return True
    headers = set()
    for line in lines:
        if not line.strip():
            break
        if not _HEADER.match(line) and not line.startswith((" ", "\t")):
            return False
        headers.add(line.split(":", 1)[0].lower())
    return {"from", "subject"} <= headers


def _read(path: Path, name: str, strip: int = 1) -> Patch:
    if not path.is_file():
        raise LabError(f"patch {name}: no such file")
    data = path.read_bytes()
    if not data.strip():
        raise LabError(f"patch {name}: empty file")
    return Patch(path.resolve(), name, data, strip)


def read_series(spec: str) -> list[Patch]:
    """A quilt series: a DIR with a ``series`` file, or the series file; entries are 'NAME [-pN]'."""
    path = Path(spec)
    series = path / "series" if path.is_dir() else path
    if not series.is_file():
        raise LabError(f"--series {spec}: no such series file")
    out: list[Patch] = []
    seen: dict[str, int] = {}  # a patch's file -> the line that listed it first
    for n, raw in enumerate(read_text_file(series, "--series").splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        name, *opts = line.split()
        strip = 1
        for opt in opts:
            m = re.fullmatch(r"-p(\d+)", opt)
            if not m:
                raise LabError(f"--series {series}:{n}: unsupported option '{opt}' (only -pN)")
            strip = int(m.group(1))
        p = series.parent / name
        if not p.is_file():
            raise LabError(f"--series {series}:{n}: {name}: no such patch")
        first = seen.setdefault(str(p.resolve()), n)
        if first != n:  # (applied twice, the second would fail or revert: never a series' meaning)
            raise LabError(f"--series {series}:{n}: {name}: listed twice (line {first} too)")
        out.append(_read(p, name, strip))
    if not out:  # (a build "patched" by it is the baseline: numalab ab would find so only after building both)
        raise LabError(f"--series {series}: lists no patch")
    return out


def load_patches(patch_files: list[str] | None, series: str | None) -> list[Patch]:
    """The series first (in its order), then each --patch in the order given."""
    out = read_series(series) if series else []
    out += [_read(Path(f), f) for f in patch_files or []]
    return out


def _run(cmd: list[str], tree: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LC_ALL": "C"}
    return subprocess.run(cmd, cwd=tree, capture_output=True, env=env, **TOOL_TEXT)  # (a file's name may be any bytes)


def _patch_cmd(patch: Patch, dry_run: bool) -> list[str]:
    cmd = ["patch", f"-p{patch.strip}", "--fuzz=0", "--forward", "--batch", "--no-backup-if-mismatch",
           "--reject-file=-"]  # fmt: skip
    return [*cmd, *(["--dry-run"] if dry_run else []), "-i", str(patch.path)]


def describe_failure(name: str, output: str, strip: int = 1) -> str:
    """One line from GNU patch's output: the patch, the file and the (first) failed hunk."""
    current = ""
    failed: list[tuple[str, str, str]] = []
    missing = reversed_ = fatal = ""
    for line in output.splitlines():
        m = re.match(r"^(?:checking|patching) file (.+)$", line)
        if m:
            current = m.group(1).strip("'\"")
            continue
        m = re.match(r"^Hunk #(\d+) FAILED at (\d+)", line)
        if m:
            failed.append((current, m.group(1), m.group(2)))
        elif line.startswith("can't find file to patch"):
            missing = missing or "?"
        elif missing == "?" and re.match(r"^\|(\+\+\+|---) ", line):
            target = line[5:].split("\t")[0].strip()
            if target != "/dev/null":
                missing = "/".join(target.split("/")[strip:]) or target
        elif line.startswith("Reversed (or previously applied) patch detected"):
            reversed_ = reversed_ or current
        elif line.startswith("patch: **** ") and not fatal:
            fatal = line[len("patch: **** ") :].strip()
    if failed:
        file, hunk, at = failed[0]
        more = f" (and {len(failed) - 1} more failed hunk(s))" if len(failed) > 1 else ""
        return f"patch {name} does not apply: {file}: hunk #{hunk} FAILED at line {at}{more}"
    if missing:
        return f"patch {name} does not apply: {missing}: no such file in the source tree (wrong -p level?)"
    if reversed_:
        return f"patch {name} does not apply: {reversed_}: hunk #1 is already applied (or the patch is reversed)"
    if fatal:
        return f"patch {name}: {fatal}"
    last = [ln for ln in output.splitlines() if ln.strip()]
    return f"patch {name} does not apply: {last[-1] if last else 'patch failed'}"


def _apply_mbox(tree: Path, patch: Patch) -> str | None:
    proc = _run(["git", *GIT_ID, "am", "--quiet", f"-p{patch.strip}", str(patch.path)], tree)
    if proc.returncode == 0:
        return None
    _run(["git", "am", "--abort"], tree)
    dry = _run(_patch_cmd(patch, True), tree)
    if dry.returncode != 0:
        return describe_failure(patch.name, dry.stdout + dry.stderr, patch.strip)
    errors = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
    return f"patch {patch.name}: git am failed: {errors[0] if errors else 'unknown error'}"


def _apply_diff(tree: Path, patch: Patch) -> str | None:
    dry = _run(_patch_cmd(patch, True), tree)
    if dry.returncode != 0:
        return describe_failure(patch.name, dry.stdout + dry.stderr, patch.strip)
    real = _run(_patch_cmd(patch, False), tree)
    if real.returncode != 0:
        return describe_failure(patch.name, real.stdout + real.stderr, patch.strip)
    # Commit it, so that a later mbox patch (git am) finds a clean index.
    for cmd in (["add", "--all", "--force", "."], ["commit", "--quiet", "--no-verify", "-m", patch.name]):
        proc = _run(["git", *GIT_ID, *cmd], tree)
        if proc.returncode != 0:
            return f"patch {patch.name}: git {cmd[0]} failed: {proc.stderr.strip() or proc.stdout.strip()}"
    return None


def apply_patches(tree: Path, patches: list[Patch]) -> None:
    """Apply in order onto a pristine tree; on any failure reset the tree and raise a one-line LabError."""
    for patch in patches:
        error = _apply_mbox(tree, patch) if patch.kind == "mbox" else _apply_diff(tree, patch)
        if error:
            reset_tree(tree)
            raise LabError(error)

"""Bytes that are not UTF-8 (in a path, a file name, a tool's output) and file-system oddities from issue #47:
each is a one-line `numalab: error:` naming the field or file (exit 2), or is carried byte for byte, never a
traceback and never half-written output. Nothing here boots a VM or builds a kernel."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.errors import LabError
from lab.kernel import tree_ab
from lab.kernel.git_tree import uncommitted
from lab.kernel.patches import apply_patches, load_patches
from lab.kernel.source import BASE_REF, reset_tree
from lab.kernel.tree_ab import TreeAB, tree_builds
from lab.run.execute import _prepare_out
from lab.untrusted import escape_surrogates, term_safe
from lab.workloads import image_layers
from lab.workloads.registry import FOLDERS, discover
from lab.workloads.user_workload import load_workload_file

# A run that cannot boot even if a check below regressed: its QEMU does not exist (found before any VM starts).
RUN = ("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--accel", "tcg",
       "--qemu", "/nonexistent/qemu-system-x86_64")  # fmt: skip


def test_a_byte_that_is_not_utf8_is_shown_as_the_byte() -> None:
    name = os.fsdecode(b"caf\xe9.c")
    assert escape_surrogates(name) == "caf\\xe9.c"
    assert escape_surrogates("caf\u00e9 \ud800") == "caf\u00e9 \\ud800"  # (UTF-8 stays; another lone surrogate)
    assert term_safe(name + "\x1b") == "caf\\xe9.c\\x1b"


def test_run_out_that_is_not_utf8_is_refused_before_anything_is_made(tmp_path) -> None:
    out = tmp_path / os.fsdecode(b"r\xff")
    proc = numalab(*RUN, "--out", str(out), timeout=120)
    assert_one_line_error(proc, f"--out {tmp_path}/r\\xff: not UTF-8")
    assert proc.returncode == 2
    assert os.listdir(tmp_path) == []  # no .r\xff.partial
    # A run id can carry such a byte too (a kernel file's name): refused where the record's directory is made.
    with pytest.raises(LabError, match=r"^the run record .*/runs/1-ring-2-caf\\xe9-idle: not UTF-8"):
        _prepare_out(tmp_path / "runs" / os.fsdecode(b"1-ring-2-caf\xe9-idle"), given=False)
    assert os.listdir(tmp_path) == []


def test_run_in_a_directory_whose_name_is_not_utf8(tmp_path) -> None:
    here = tmp_path / os.fsdecode(b"d\xe9")
    here.mkdir()
    proc = numalab(*RUN, timeout=120, cwd=here, env={"PYTHONPATH": str(REPO)})
    assert_one_line_error(proc, "--runs-dir runs: its absolute path", "/d\\xe9/runs is not UTF-8")
    assert os.listdir(here) == []


# --- git and patch saying a byte that is not UTF-8 (numalab ab, bisect, kernel build, matrix recipes) -----------


CAFE = b"kernel/caf\xe9.c"
NAMED = "kernel/caf\\xe9.c"  # as a message shows it


def _git(repo: Path, *args: str) -> bytes:
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True,
                          capture_output=True).stdout  # fmt: skip


def _tree(root: Path, files: dict[bytes, bytes]) -> Path:
    """A git tree of ``files`` (names and contents as bytes), committed, its commit also numalab's base ref."""
    root.mkdir(parents=True)
    for name, data in files.items():
        path = root / os.fsdecode(name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "base")
    _git(root, "update-ref", BASE_REF, "HEAD")
    return root


def test_an_uncommitted_edit_that_is_not_utf8_becomes_a_byte_exact_patch(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    repo = _tree(tmp_path / "linux", {b"Makefile": b"all:\n", b"kernel/a.c": b"int x;\n", CAFE: b"int y;\n"})
    edited = b"int x; /* caf\xe9 */\n"
    (repo / "kernel" / "a.c").write_bytes(edited)
    (repo / os.fsdecode(CAFE)).write_bytes(b"int y; /* \xff */\n")
    assert len(uncommitted(repo)) == 2
    builds = tree_builds(TreeAB(repo, "HEAD", include_uncommitted=True))
    (patch,) = builds.patched.patches
    assert b"caf\xe9" in patch.data and b"\xff" in patch.data
    # Applied as a build applies it, the edits come back byte for byte.
    copy = _tree(tmp_path / "copy", {b"Makefile": b"all:\n", b"kernel/a.c": b"int x;\n", CAFE: b"int y;\n"})
    apply_patches(copy, [patch])
    assert (copy / "kernel" / "a.c").read_bytes() == edited
    assert (copy / os.fsdecode(CAFE)).read_bytes() == b"int y; /* \xff */\n"


def _cafe_diff(old: bytes, new: bytes) -> bytes:
    return b"--- a/%s\n+++ b/%s\n@@ -1 +1 @@\n-%s\n+%s\n" % (CAFE, CAFE, old, new)


def test_a_patch_to_a_file_whose_name_is_not_utf8_applies_byte_exact(tmp_path) -> None:
    tree = _tree(tmp_path / "tree", {CAFE: b"int a;\n"})
    good = tmp_path / "good.diff"
    good.write_bytes(_cafe_diff(b"int a;", b"int b; /* \xe9 */"))
    mbox = tmp_path / "m.patch"
    mbox.write_bytes(b"From: T <t@t>\nSubject: [PATCH] caf\xe9\n\n---\n" + _cafe_diff(b"int b; /* \xe9 */", b"int c;"))
    apply_patches(tree, load_patches([str(good), str(mbox)], None))
    assert (tree / os.fsdecode(CAFE)).read_bytes() == b"int c;\n"
    reset_tree(tree)
    bad = tmp_path / "bad.diff"
    bad.write_bytes(_cafe_diff(b"int nope;", b"int b;"))
    with pytest.raises(LabError) as err:
        apply_patches(tree, load_patches([str(good), str(bad)], None))
    assert escape_surrogates(str(err.value)) == f"patch {bad} does not apply: {NAMED}: hunk #1 FAILED at line 1"
    assert (tree / os.fsdecode(CAFE)).read_bytes() == b"int a;\n"  # (all or nothing)


def test_kernel_build_names_the_file_of_a_failing_patch_escaped(tmp_path) -> None:
    src = tmp_path / "src"
    for name, data in {b"Makefile": b"", b"Kconfig": b"", CAFE: b"int a;\n"}.items():
        (src / os.fsdecode(name)).parent.mkdir(parents=True, exist_ok=True)
        (src / os.fsdecode(name)).write_bytes(data)
    bad = tmp_path / "bad.diff"
    bad.write_bytes(_cafe_diff(b"int nope;", b"int b;"))
    proc = numalab("kernel", "build", "-q", "--source", str(src), "--patch", str(bad), timeout=300,
                   env={"NUMALAB_CACHE": str(tmp_path / "cache")})  # fmt: skip
    assert_one_line_error(proc, f"patch {bad} does not apply: {NAMED}: hunk #1 FAILED at line 1")


# --- a user's workload files ---------------------------------------------------------------------------------

WORKLOAD = ('command: ./a\nfiles: [{file}]\nresults: {{json-line: "R "}}\n'
            "metrics: [{{name: ops, higher_is_better: true}}]\n")  # fmt: skip


def test_a_symlink_loop_among_a_workloads_files_is_named(tmp_path) -> None:
    (tmp_path / "a").symlink_to("b")
    (tmp_path / "b").symlink_to("a")
    w = tmp_path / "w.yaml"
    w.write_text(WORKLOAD.format(file="a"))
    needle = f"workload file {w}: files[0] a: a loop of symbolic links"
    assert_one_line_error(numalab("workload", "show", str(w)), needle)
    assert_one_line_error(numalab(*RUN, "--workload", str(w), timeout=120), needle)
    cmd = [a for a in RUN if a != "--workload" and a != "idle"]
    proc = numalab(*cmd, "--workload-cmd", "./a", "--workload-file", str(tmp_path / "a"), timeout=120)
    assert_one_line_error(proc, f"--workload-file {tmp_path}/a: a loop of symbolic links")
    m = tmp_path / "m.yaml"
    m.write_text("name: m\ntopologies: [ring-2]\nkernels: [stock]\nworkloads: [w.yaml]\n")
    assert_one_line_error(numalab("matrix", "check", str(m)), f"{m}: workloads[0]: {needle}")


# --- a built-in workload's folder left behind ---------------------------------------------------------------


def test_a_workload_folder_left_with_only_pycache_is_not_a_workload(tmp_path) -> None:
    root = tmp_path / "workloads"
    shutil.copytree(FOLDERS / "idle", root / "idle", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "gone" / "__pycache__").mkdir(parents=True)  # (a checkout removed gone/'s files, not its bytecode)
    (root / "gone" / "__pycache__" / "scale.cpython-311.pyc").write_bytes(b"\xa7\r\r\n")
    workloads, _tools = discover(root)
    assert list(workloads) == ["idle"]
    (root / "gone" / "notes.txt").write_text("not only bytecode: a folder someone is making, still an error\n")
    with pytest.raises(LabError, match=r"gone: a built-in workload's folder has no workload.yaml"):
        discover(root)


# --- a workload file whose name is not UTF-8 -------------------------------------------------------------------


def _workload_with_a_non_utf8_name(tmp_path: Path) -> Path:
    """A workload file named w\\xe9.yaml carrying caf\\xe9 (through a symlink: YAML text is UTF-8)."""
    (tmp_path / os.fsdecode(b"caf\xe9")).write_bytes(b'#!/bin/sh\necho R {"ops": 1}\n')
    (tmp_path / "a").symlink_to(os.fsdecode(b"caf\xe9"))
    w = tmp_path / os.fsdecode(b"w\xe9.yaml")
    w.write_text(WORKLOAD.format(file="a"))
    return w


@pytest.mark.parametrize("strict", [False, True])
def test_workload_show_escapes_a_name_that_is_not_utf8(tmp_path, strict) -> None:
    w = _workload_with_a_non_utf8_name(tmp_path)
    # C.UTF-8 (PYTHONIOENCODING unset) writes such a byte raw, which is not UTF-8 text; PYTHONIOENCODING=utf-8's
    # strict stdout raised UnicodeEncodeError.
    env = {**os.environ, "LC_ALL": "C.UTF-8", "PYTHONPATH": str(REPO)}
    env.pop("PYTHONIOENCODING", None)
    env |= {"PYTHONIOENCODING": "utf-8"} if strict else {}
    for json_flag in ([], ["--json"]):
        proc = subprocess.run([sys.executable, "-m", "lab.cli", "workload", "show", *json_flag, str(w)],
                              capture_output=True, env=env, cwd=REPO, timeout=60)  # fmt: skip
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr.decode(errors="replace")
        out = proc.stdout.decode("utf-8")  # (strict: every byte UTF-8)
        assert f"{tmp_path}/w\\xe9.yaml" in out.replace("\\\\", "\\")
        assert "caf\\xe9" in out.replace("\\\\", "\\")


def test_a_file_whose_name_is_not_utf8_is_carried_into_the_guest_byte_exact(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    workload = load_workload_file(_workload_with_a_non_utf8_name(tmp_path))
    archive = image_layers.user_layer(workload.user)
    assert archive is not None
    data = archive.read_bytes()
    assert b"workload/caf\xe9\0" in data and b'echo R {"ops": 1}' in data


# --- numalab ab: the patched side's patches checked before the baseline's build ------------------------------


class _BuildStarted(Exception):
    """Where the test's kernel build would have started."""


def _no_build(*_args) -> None:
    raise _BuildStarted


def test_ab_refuses_a_patch_that_does_not_apply_or_an_empty_series_before_any_build(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(tree_ab, "build_kernel", _no_build)
    repo = _tree(tmp_path / "linux", {b"Makefile": b"all:\n", b"kernel/a.c": b"int a;\n"})
    series = tmp_path / "q"
    series.mkdir()
    (series / "series").write_text("# nothing yet\n")
    with pytest.raises(LabError, match=rf"^--series {series}/series: lists no patch$"):
        tree_builds(TreeAB(repo, "HEAD", series=str(series)))
    good, second = tmp_path / "good.diff", tmp_path / "second.diff"
    good.write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int a;\n+int b;\n")
    second.write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int a;\n+int c;\n")  # (on a, not b)
    builds = tree_builds(TreeAB(repo, "HEAD", patches=(str(good), str(second))))
    with pytest.raises(LabError, match=rf"^patch {second} does not apply: kernel/a.c: hunk #1 FAILED at line 1$"):
        tree_ab.build_pair(builds, lambda _msg: None)
    # Patches that apply are checked, the source's private tree left pristine, and then the baseline is built.
    second.write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int b;\n+int c;\n")
    builds = tree_builds(TreeAB(repo, "HEAD", patches=(str(good), str(second))))
    with pytest.raises(_BuildStarted):
        tree_ab.build_pair(builds, lambda _msg: None)
    (private,) = (tmp_path / "cache" / "kernels" / "src").glob("*/tree")
    assert (private / "kernel" / "a.c").read_bytes() == b"int a;\n"


def test_ab_refuses_a_qemu_that_is_not_there_before_any_build(tmp_path) -> None:
    """--qemu is resolved with the run's other options, not after two kernel builds (which can take an hour)."""
    repo = _tree(tmp_path / "linux", {b"Makefile": b"all:\n", b"kernel/a.c": b"int a;\n"})
    env = {"NUMALAB_CACHE": str(tmp_path / "cache")}
    patch = tmp_path / "p.diff"
    patch.write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int a;\n+int b;\n")
    proc = numalab("ab", str(repo), "--base", "HEAD", "--patch", str(patch), "--qemu", str(tmp_path / "no-qemu"),
                   "--out", str(tmp_path / "o"), env=env, timeout=60)  # fmt: skip
    assert_one_line_error(proc, f"--qemu {tmp_path / 'no-qemu'}: not found")
    assert not (tmp_path / "cache" / "kernels").exists() and not (tmp_path / "o").exists()


def test_a_matrix_checks_every_recipes_patches_before_its_first_build(tmp_path, monkeypatch) -> None:
    """Two kernel recipes: the second's patch does not apply. Found before the first recipe is built."""
    from lab.kernel import build
    from lab.matrix.definition import load_matrix
    from lab.matrix.kernels import matrix_kernel_args

    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "_build_locked", _no_build)
    repo = _tree(tmp_path / "linux", {b"Makefile": b"all:\n", b"kernel/a.c": b"int a;\n"})
    (tmp_path / "good.diff").write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int a;\n+int b;\n")
    (tmp_path / "bad.diff").write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int z;\n+int c;\n")
    spec = tmp_path / "m.yaml"
    spec.write_text("name: m\ntopologies: [ring-2]\nworkloads: [idle]\nkernels:\n"
                    f"  - {{name: one, build: {{source: '{repo}@HEAD', patches: [good.diff]}}}}\n"
                    f"  - {{name: two, build: {{source: '{repo}@HEAD', patches: [bad.diff]}}}}\n")  # fmt: skip
    with pytest.raises(LabError, match=rf"^{spec}: kernels: two: patch .*bad.diff does not apply"):
        matrix_kernel_args(load_matrix(str(spec)), lambda _msg: None)
    (tmp_path / "bad.diff").write_text("--- a/kernel/a.c\n+++ b/kernel/a.c\n@@ -1 +1 @@\n-int a;\n+int c;\n")
    with pytest.raises(_BuildStarted):  # both apply: the first build starts
        matrix_kernel_args(load_matrix(str(spec)), lambda _msg: None)

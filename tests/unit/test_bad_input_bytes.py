"""Bytes that are not UTF-8 (in a path, a file name, a tool's output) and file-system oddities from issue #47:
each is a one-line `numalab: error:` naming the field or file (exit 2), or is carried byte for byte, never a
traceback and never half-written output. Nothing here boots a VM or builds a kernel."""

from __future__ import annotations

import os
from pathlib import Path

from common import assert_one_line_error, numalab

from lab.untrusted import escape_surrogates, term_safe

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


def test_run_in_a_directory_whose_name_is_not_utf8(tmp_path) -> None:
    here = tmp_path / os.fsdecode(b"d\xe9")
    here.mkdir()
    proc = numalab(*RUN, timeout=120, cwd=here, env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert_one_line_error(proc, "--runs-dir runs: its absolute path", "/d\\xe9/runs is not UTF-8")
    assert os.listdir(here) == []

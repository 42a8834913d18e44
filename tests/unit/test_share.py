"""The guest's results share, host side: the guard that stops a guest sending too much, what the host
sees in the share, and the run scratch directories a killed numalab leaves behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.paths import clean_stale_scratch, run_scratch
from lab.vm.share import ShareGuard, ShareLimits, guest_done, inventory, open_guest_file, usage


def test_the_guard_names_what_went_over(tmp_path) -> None:
    share = tmp_path / "share"
    share.mkdir()
    console = tmp_path / "console.log"
    console.write_bytes(b"x" * 100)
    guard = ShareGuard(share, console, ShareLimits(output_bytes=1 << 20, entries=4, console_bytes=200))
    assert guard() is None
    (share / "results.tar").write_bytes(b"\0" * (1 << 20))
    assert guard() is None  # at the limit is fine
    (share / "more").write_bytes(b"\0")
    assert guard() == "the guest wrote 1 MiB to the results share, over the 1 MiB limit (--guest-output-limit)"
    (share / "more").unlink()
    for i in range(4):
        (share / f"f{i}").mkdir()
    assert guard() == "the guest made more than 4 files in the results share"
    console.write_bytes(b"x" * 201)
    assert guard() == "console output over the 200 bytes limit"
    # A sparse file counts at its apparent size: that is what the host would read.
    sparse = tmp_path / "share2"
    sparse.mkdir()
    with open(sparse / "results.tar", "wb") as f:
        f.truncate(1 << 40)
    assert "over the" in ShareGuard(sparse, None, ShareLimits(output_bytes=1 << 30))()


def test_too_small_a_limit_is_a_one_line_error() -> None:
    with pytest.raises(LabError, match="--guest-output-limit: must be at least 1M"):
        ShareLimits(output_bytes=1000)


def test_inventory_reports_links_devices_and_setuid_files(tmp_path) -> None:
    """What mapped-file makes impossible is still reported if it ever appears (another share model,
    a libvirt host set up otherwise): the manifest's guest_share.special."""
    share = tmp_path / "share"
    share.mkdir()
    (share / "readback.tar").write_bytes(b"t")
    (share / "link").symlink_to("/etc/passwd")
    (share / "suid").write_bytes(b"#!/bin/sh\n")
    os.chmod(share / "suid", 0o4755)
    os.mkfifo(share / "fifo")
    (share / ".virtfs_metadata").mkdir()
    (share / ".virtfs_metadata" / "link").write_text("metadata")
    inv = inventory(share)
    assert inv["entries"] == 4
    assert sorted(e["name"] for e in inv["unexpected"]) == ["fifo", "link", "suid"]
    special = {e["name"]: (e["type"], e["mode"]) for e in inv["special"]}
    assert special == {"link": ("symlink", "0777"), "suid": ("file", "4755"), "fifo": ("other", "0644")}


def test_guest_done_and_open_guest_file(tmp_path) -> None:
    share = tmp_path
    assert not guest_done(share)
    (share / "guest-done").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text("done\n")
    assert not guest_done(share)  # never through a link
    (share / "guest-done").unlink()
    (share / "guest-done").write_text("done\n")
    assert guest_done(share)
    with pytest.raises(ValueError, match="not a file the guest sends"):
        open_guest_file(share, "../etc/passwd", 100)


def test_a_killed_runs_scratch_is_removed_by_the_next_run(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    code = "from lab.paths import run_scratch\nimport os\nwith run_scratch() as d:\n print(d, flush=True)\n os.kill(os.getpid(), 9)\n"  # noqa: E501
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ})
    assert proc.returncode == -9
    left = Path(proc.stdout.strip())
    assert left.parent == tmp_path and left.is_dir()
    (tmp_path / "numalab-not-ours").mkdir()  # no lock file: not touched
    with run_scratch() as live:
        assert not left.exists()
        assert clean_stale_scratch(tmp_path) == []  # a live run's directory stays
        assert live.is_dir()
    assert not live.exists()
    assert (tmp_path / "numalab-not-ours").is_dir()


def test_the_limit_and_the_manifest_count_the_same_entries(tmp_path) -> None:
    """QEMU's .virtfs_metadata (one file per guest file with metadata, mapped-file) is not the guest's: with
    it counted by the limit and not by the inventory, a run said 132 entries and was stopped for 256."""
    share = tmp_path / "share"
    share.mkdir()
    meta = share / ".virtfs_metadata"
    meta.mkdir()
    for i in range(5):
        (share / f"f{i}").write_bytes(b"x")
        (meta / f"f{i}").write_text("virtfs.uid=0\n" * 10)
    (share / "d").mkdir()
    (share / "d" / ".virtfs_metadata").mkdir()
    (share / "d" / ".virtfs_metadata" / "g").write_text("m")
    (share / "d" / "g").write_bytes(b"yy")
    inv = inventory(share)
    assert (inv["bytes"], inv["entries"]) == usage(share, 100) == (5 + 2 + (share / "d").stat().st_size, 7)
    assert ShareGuard(share, None, ShareLimits(entries=7))() is None
    assert ShareGuard(share, None, ShareLimits(entries=6))() == "the guest made more than 6 files in the results share"

"""The guest's result tars, read from its share and unpacked on the host: checked members, limits,
nothing half-written, nothing followed."""

from __future__ import annotations

import gzip
import io
import os
import tarfile
from pathlib import Path

import pytest
from common import guest_tar

from lab.analysis.results import MAX_MEMBERS, unpack_results


@pytest.fixture
def dirs(tmp_path) -> tuple[Path, Path]:
    share, run = tmp_path / "share", tmp_path / "run"
    share.mkdir()
    run.mkdir()
    return share, run


def test_both_tars_become_the_run_files(dirs) -> None:
    share, run = dirs
    (run / "console.log").write_text("boot\n")
    guest_tar(share / "readback.tar", {"./topology.txt": b"node 0 cpulist 0-1\n", "./uname.txt": b"6.1\n"})
    guest_tar(
        share / "results.tar",
        {"./workload.rc": b"0\n", "./trace-raw": None, "./trace-raw/cpu0": b"\0" * 4096, "./trace-raw/tracing": None},
    )
    got = unpack_results(share, run)
    assert got.problems == [] and got.limit is None
    assert got.bytes == len(b"node 0 cpulist 0-1\n") + 4 + 2 + 4096
    assert sorted(p.name for p in run.iterdir()) == [
        "console.log", "topology.txt", "trace-raw", "uname.txt", "workload.rc",
    ]  # fmt: skip
    assert (run / "topology.txt").read_text() == "node 0 cpulist 0-1\n"
    assert (run / "trace-raw" / "cpu0").stat().st_size == 4096
    assert (run / "trace-raw" / "tracing").is_dir()


def test_only_the_readback_of_a_run_that_died_later(dirs) -> None:
    share, run = dirs
    guest_tar(share / "readback.tar", {"./dmesg-boot.txt": b"[0.0] Linux\n"})
    assert unpack_results(share, run).problems == []
    assert [p.name for p in run.iterdir()] == ["dmesg-boot.txt"]


def test_a_truncated_tar_unpacks_nothing(dirs) -> None:
    share, run = dirs
    guest_tar(share / "results.tar", {"./vmstat.start": b"x" * 20000, "./workload.rc": b"0\n"})
    data = (share / "results.tar").read_bytes()
    (share / "results.tar").write_bytes(data[:10000])  # the guest died while writing it
    problems = unpack_results(share, run).problems
    assert len(problems) == 1 and problems[0].startswith("results.tar: "), problems
    assert list(run.iterdir()) == []


def test_members_outside_the_run_or_not_plain_are_refused(dirs, tmp_path) -> None:
    share, run = dirs
    guest_tar(share / "readback.tar", {"../evil": b"x"})
    with tarfile.open(share / "results.tar", "w") as tf:
        link = tarfile.TarInfo("./topology.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    assert unpack_results(share, run).problems == [
        "readback.tar: unexpected member '../evil'",
        "results.tar: './topology.txt' is a symbolic link (to '/etc/passwd'); only files and directories are taken",
    ]
    assert not (tmp_path / "evil").exists()
    assert list(run.iterdir()) == []


def test_a_member_may_not_replace_a_file_of_the_host(dirs) -> None:
    share, run = dirs
    (run / "console.log").write_text("the host's\n")
    guest_tar(share / "results.tar", {"./console.log": b"the guest's\n"})
    assert unpack_results(share, run).problems == ["results.tar: console.log is already in the run directory"]
    assert (run / "console.log").read_text() == "the host's\n"


def test_the_host_never_follows_a_link_in_the_share(dirs, tmp_path) -> None:
    """Even if a share held a real symlink (mapped-file makes that impossible), the host does not
    read through it; nor does it read a FIFO (which would block) or a directory."""
    share, run = dirs
    secret = tmp_path / "secret.tar"
    guest_tar(secret, {"./stolen": b"host data\n"})
    (share / "readback.tar").symlink_to(secret)
    os.mkfifo(share / "results.tar")
    got = unpack_results(share, run)
    assert [p.split(":")[0] for p in got.problems] == ["readback.tar", "results.tar"], got.problems
    assert "not a regular file" in got.problems[0] and "not a regular file" in got.problems[1]
    assert list(run.iterdir()) == []


def test_a_tar_bomb_stops_at_the_limit(dirs) -> None:
    """A small tar may claim huge members (the sizes in its headers are what it would unpack to): the
    limit is checked against them before anything is written."""
    share, run = dirs
    header = tarfile.TarInfo("./huge")
    header.size = 300 << 20  # 300 MiB claimed, 512 bytes sent
    (share / "results.tar").write_bytes(header.tobuf(format=tarfile.GNU_FORMAT))
    got = unpack_results(share, run, max_bytes=16 << 20)
    assert got.limit == "results.tar unpacks to more than 16 MiB", got
    assert got.problems == [got.limit]
    assert list(run.iterdir()) == []
    # Over the limit by its own size: not even opened.
    guest_tar(share / "results.tar", {"./zeros": b"\0" * (3 << 20)})
    got = unpack_results(share, run, max_bytes=1 << 20)
    assert got.limit == "results.tar is 3 MiB, over the 1 MiB limit", got.limit


def test_compressed_and_sparse_tars_are_refused(dirs) -> None:
    """A compressed tar could expand without bound before its first member is checked (a 10 KB archive
    became 300 MiB): only plain tars are read, as the guest init writes them."""
    share, run = dirs
    buf = io.BytesIO()
    guest_tar(share / "plain.tar", {"./zeros": b"\0" * (1 << 20)})
    (share / "results.tar").write_bytes(gzip.compress((share / "plain.tar").read_bytes()))
    got = unpack_results(share, run)
    assert got.problems and got.problems[0].startswith("results.tar: "), got.problems
    assert list(run.iterdir()) == []
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tf:
        info = tarfile.TarInfo("./sparse")
        info.type = tarfile.GNUTYPE_SPARSE
        tf.addfile(info)
    (share / "results.tar").write_bytes(buf.getvalue())
    assert unpack_results(share, run).problems == [
        "results.tar: './sparse' is a sparse file; only files and directories are taken"
    ]


def test_too_many_members(dirs) -> None:
    share, run = dirs
    with tarfile.open(share / "results.tar", "w") as tf:
        for i in range(MAX_MEMBERS + 1):
            tf.addfile(tarfile.TarInfo(f"./f{i}"), io.BytesIO(b""))
    got = unpack_results(share, run)
    assert got.limit == f"results.tar has more than {MAX_MEMBERS} members (files and directories)"
    assert list(run.iterdir()) == []


def test_a_tar_of_5000_files_goes_over_the_runs_member_limit(dirs) -> None:
    """Issue 38: the limit counted bytes only (and 20,000 members); a run's own is 1024 + 4 a vCPU, over both
    tars together (lab.run.request.RunRequest.limits)."""
    share, run = dirs
    with tarfile.open(share / "readback.tar", "w") as tf:
        for i in range(30):
            tf.addfile(tarfile.TarInfo(f"./r{i}"), io.BytesIO(b""))
    with tarfile.open(share / "results.tar", "w") as tf:
        for i in range(5000):
            tf.addfile(tarfile.TarInfo(f"./f{i}"), io.BytesIO(b""))
    got = unpack_results(share, run, max_members=1032)
    assert got.limit == "results.tar has more than 1002 members (files and directories)"
    assert sorted(p.name for p in run.iterdir() if p.name.startswith("f")) == []  # (nothing of it half-written)
    assert len([p for p in run.iterdir() if p.name.startswith("r")]) == 30

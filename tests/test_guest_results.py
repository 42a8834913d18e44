"""The guest's result tars, unpacked on the host: checked members, nothing half-written."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from lab.guest.results import unpack_results


def _tar(path: Path, members: dict[str, bytes | None]) -> None:
    """A tar like busybox's `tar -cf X -C dir .`: "./" first, then ./name entries (None: a directory)."""
    with tarfile.open(path, "w") as tf:
        for name, data in {"./": None, **members}.items():
            info = tarfile.TarInfo(name)
            if data is None:
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))


def test_both_tars_become_the_run_files(tmp_path) -> None:
    (tmp_path / "console.log").write_text("boot\n")
    _tar(tmp_path / "readback.tar", {"./topology.txt": b"node 0 cpulist 0-1\n", "./uname.txt": b"6.1\n"})
    _tar(
        tmp_path / "results.tar",
        {"./workload.rc": b"0\n", "./trace-raw": None, "./trace-raw/cpu0": b"\0" * 4096, "./trace-raw/tracing": None},
    )
    assert unpack_results(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "console.log", "topology.txt", "trace-raw", "uname.txt", "workload.rc",
    ]  # fmt: skip
    assert (tmp_path / "topology.txt").read_text() == "node 0 cpulist 0-1\n"
    assert (tmp_path / "trace-raw" / "cpu0").stat().st_size == 4096
    assert (tmp_path / "trace-raw" / "tracing").is_dir()


def test_only_the_readback_of_a_run_that_died_later(tmp_path) -> None:
    _tar(tmp_path / "readback.tar", {"./dmesg-boot.txt": b"[0.0] Linux\n"})
    assert unpack_results(tmp_path) == []
    assert [p.name for p in tmp_path.iterdir()] == ["dmesg-boot.txt"]


def test_a_truncated_tar_is_kept_and_nothing_of_it_unpacked(tmp_path) -> None:
    _tar(tmp_path / "results.tar", {"./vmstat.start": b"x" * 20000, "./workload.rc": b"0\n"})
    data = (tmp_path / "results.tar").read_bytes()
    (tmp_path / "results.tar").write_bytes(data[:10000])  # the guest died while writing it
    problems = unpack_results(tmp_path)
    assert len(problems) == 1 and problems[0].startswith("results.tar: "), problems
    assert [p.name for p in tmp_path.iterdir()] == ["results.tar"]


def test_members_outside_the_run_or_not_plain_are_refused(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    _tar(run / "readback.tar", {"../evil": b"x"})
    with tarfile.open(run / "results.tar", "w") as tf:
        link = tarfile.TarInfo("./topology.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tf.addfile(link)
    assert unpack_results(run) == [
        "readback.tar: unexpected member '../evil'",
        "results.tar: unexpected member './topology.txt'",
    ]
    assert not (tmp_path / "evil").exists()
    assert sorted(p.name for p in run.iterdir()) == ["readback.tar", "results.tar"]


def test_a_member_may_not_replace_a_file_of_the_host(tmp_path) -> None:
    (tmp_path / "console.log").write_text("the host's\n")
    _tar(tmp_path / "results.tar", {"./console.log": b"the guest's\n"})
    assert unpack_results(tmp_path) == ["results.tar: console.log is already in the run directory"]
    assert (tmp_path / "console.log").read_text() == "the host's\n"

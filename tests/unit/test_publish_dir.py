"""A finished cache directory is published once: a second builder of the same key does not delete the copy
the first one published (a run may be packing a guest image from it), a killed build's half is replaced,
and --refresh replaces on purpose."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from lab.paths import COMPLETE, publish_dir


def _built(root: Path, name: str, content: str) -> Path:
    d = root / f".tmp-{name}"
    d.mkdir()
    (d / "payload").write_text(content)
    (d / COMPLETE).touch()
    return d


def test_a_second_builder_keeps_the_first_ones_copy(tmp_path: Path) -> None:
    out = tmp_path / "key"
    first = publish_dir(_built(tmp_path, "a", "first"), out)
    held = (first / "payload").open()  # a run reading the first copy
    second_tmp = _built(tmp_path, "b", "second")
    assert publish_dir(second_tmp, out) == out
    assert (out / "payload").read_text() == "first" and held.read() == "first"
    assert not second_tmp.exists()  # the loser's copy is dropped, not left behind
    held.close()


def test_a_half_made_directory_is_replaced_and_refresh_replaces(tmp_path: Path) -> None:
    out = tmp_path / "key"
    out.mkdir()
    (out / "payload").write_text("half")  # no COMPLETE: a killed build
    publish_dir(_built(tmp_path, "a", "whole"), out)
    assert (out / "payload").read_text() == "whole"
    publish_dir(_built(tmp_path, "b", "fresh"), out, replace=True)
    assert (out / "payload").read_text() == "fresh"


def _publish(root: str, i: int) -> str:
    return str(publish_dir(_built(Path(root), str(i), str(i)), Path(root) / "key"))


def test_many_builders_at_once_leave_one_whole_copy(tmp_path: Path) -> None:
    with multiprocessing.get_context("fork").Pool(4) as pool:
        outs = pool.starmap(_publish, [(str(tmp_path), i) for i in range(8)])
    assert set(outs) == {str(tmp_path / "key")}
    assert (tmp_path / "key" / COMPLETE).exists() and (tmp_path / "key" / "payload").read_text() in map(str, range(8))
    assert not list(tmp_path.glob(".tmp-*"))

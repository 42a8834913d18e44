"""lab.vm.console.LineFollower: a growing console read as it grows (the run's stage watch, the nested outer
guest's echo, the freeze reproducer's watch all read it so)."""

from __future__ import annotations

from pathlib import Path

from lab.vm.console import LineFollower


def test_whole_lines_as_they_come_a_part_line_waits_for_its_end(tmp_path: Path) -> None:
    path = tmp_path / "console.log"
    follow = LineFollower(path)
    assert follow.new_lines() == []  # (not there yet)
    path.write_bytes(b"one\r\ntw")
    assert follow.new_lines() == ["one"]
    with path.open("ab") as f:
        f.write(b"o\n\xff three\n")
    assert follow.new_lines() == ["two", "\ufffd three"]
    assert follow.new_lines() == []


def test_a_bounded_read_leaves_the_rest_for_the_next_call(tmp_path: Path) -> None:
    path = tmp_path / "console.log"
    path.write_bytes(b"aaaa\nbbbb\ncccc\n")
    follow = LineFollower(path, chunk=7)
    assert follow.new_lines() == ["aaaa"]
    assert follow.new_lines() == ["bbbb"]
    assert follow.new_lines() == ["cccc"]
    assert LineFollower(path).new_lines() == ["aaaa", "bbbb", "cccc"]  # (unbounded: all there is)

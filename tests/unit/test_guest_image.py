"""The guest image's layers: a small base, and trace-cmd / perf only for the runs that use them."""

from __future__ import annotations

import stat

import pytest

from lab.errors import LabError
from lab.guest import image
from lab.topology.model.spec import load_topology
from lab.workloads import image_layers
from lab.workloads.elf import ldd_closure
from lab.workloads.registry import WORKLOADS, get_workload


def _paths(archive) -> set[str]:
    """Entry names of a newc cpio archive (our own writer's output)."""
    data = archive.read_bytes()
    names, off = set(), 0
    while off < len(data):
        assert data[off : off + 6] == b"070701", f"bad cpio magic at {off}"
        fields = [int(data[off + 6 + 8 * i : off + 14 + 8 * i], 16) for i in range(13)]
        size, namesize = fields[6], fields[11]
        name = data[off + 110 : off + 110 + namesize - 1].decode()
        if name == "TRAILER!!!":
            break
        names.add(name)
        off += 110 + namesize
        off += -off % 4
        off += size + (-size % 4)
    return names


@pytest.mark.parametrize(
    ("workload", "mode", "tracing", "tools"),
    [
        ("numa01", "raw", True, ()),
        ("numa01", "extract", True, ("trace-cmd",)),
        ("numa01", "record", True, ("trace-cmd",)),
        ("numa01", "record", False, ()),  # --no-trace: nothing records
        ("perf-numa01", "raw", True, ("perf",)),
        ("perf-numa01", "record", True, ("trace-cmd", "perf")),
    ],
)
def test_tools_for(workload, mode, tracing, tools) -> None:
    assert image_layers.tools_for(get_workload(workload), mode, tracing) == tools


def test_base_has_busybox_init_and_tracegrab_but_no_workload_perf_or_trace_cmd(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    names = _paths(image.base_image())
    for needed in ("init", "bin/busybox", "usr/bin/numalab-tracegrab", "etc/fstab"):
        assert needed in names
    for absent in ("usr/bin/perf", "usr/bin/trace-cmd", "usr/bin/numa01", "usr/bin/idle"):
        assert absent not in names
    # busybox's applet links come made (no `busybox --install` at every boot)
    assert {"bin/sh", "bin/mount", "bin/tar", "bin/poweroff"} <= names
    links = {e.path: e for e in image.base_entries() if stat.S_ISLNK(e.mode)}
    assert links["bin/sh"].data == b"busybox"


def test_tool_layer_holds_the_binary_and_its_library_closure(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    layer = image_layers.tool_layer("trace-cmd")
    names = _paths(layer)
    assert "usr/bin/trace-cmd" in names
    libs = {p.lstrip("/") for p in ldd_closure("/usr/bin/trace-cmd")}
    assert libs and libs <= names
    assert image_layers.tool_layer("trace-cmd") == layer  # cached by content


def test_unknown_tool_is_a_one_line_error() -> None:
    with pytest.raises(LabError, match="guest tool 'gdb': unknown"):
        image_layers.tool_layer("gdb")


def test_assemble_skips_missing_layers_and_ends_with_the_plan(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    base = image.base_image()
    out = image.assemble_initrd(tmp_path / "initrd.cpio", [base, None], "export X=1\n")
    data = out.read_bytes()
    assert data.startswith(base.read_bytes())
    assert b"plan/plan.sh" in data[len(base.read_bytes()) :] and b"export X=1\n" in data


def test_kernel_command_line_sets_up_the_trace_at_boot_unless_trace_cmd_records() -> None:
    from lab.guest.settings import KERNEL_CMDLINE, GuestSettings

    raw = GuestSettings("idle", 1, trace_events=("sched:sched_move_numa", "sched:sched_switch"), trace_buffer_kb=2048)
    events = "trace_event=sched:sched_move_numa,sched:sched_switch"
    assert raw.cmdline() == f"{KERNEL_CMDLINE} {events} trace_buf_size=2048K"
    numa = ("sched:sched_move_numa",)
    extract = GuestSettings("idle", 1, trace_events=numa, trace_mode="extract")
    assert "trace_event=sched:sched_move_numa " in extract.cmdline()
    assert GuestSettings("idle", 1, trace_events=numa, trace_mode="record").cmdline() == KERNEL_CMDLINE
    assert GuestSettings("idle", 1, trace_events=()).cmdline() == KERNEL_CMDLINE
    appended = GuestSettings("idle", 1, trace_events=(), kernel_args=" initcall_debug ")
    assert appended.cmdline().endswith(" initcall_debug")
    with pytest.raises(LabError, match="--append"):
        GuestSettings("idle", 1, trace_events=(), kernel_args="a\nb")


def test_base_is_found_again_by_fingerprint_and_rebuilt_when_the_init_changes(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    first = image.base_image()
    assert "etc/fstab" in _paths(first)

    def no_rebuild():
        raise AssertionError("the base was rebuilt although nothing changed")

    with monkeypatch.context() as m:
        m.setattr(image, "base_entries", no_rebuild)
        assert image.base_image() == first
    init = tmp_path / "init"
    init.write_bytes(image.INIT.read_bytes() + b"# changed\n")
    monkeypatch.setattr(image, "INIT", init)
    changed = image.base_image()
    assert changed != first and changed.read_bytes().find(b"# changed\n") > 0
    # A lost archive is built again, not returned by a stale index entry.
    changed.unlink()
    assert image.base_image() == changed and changed.is_file()


def test_a_run_carries_only_the_workload_program_it_starts(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    assert image_layers.programs_for(get_workload("numa01")) == ("numa01",)
    assert image_layers.programs_for(get_workload("tiering")) == ("numa02",)
    assert image_layers.programs_for(get_workload("perf-numa01")) == ()  # perf comes as a tool layer
    assert image.workload_image(()) is None
    layer = image.workload_image(("pairs",))
    assert _paths(layer) == {"usr/bin/pairs"}
    assert image.workload_image(("pairs",)) == layer  # cached by content


def test_each_workload_declares_what_its_command_starts(tmp_path, monkeypatch) -> None:
    """The program a workload's command starts is one it declares, built by images/workloads, or a declared
    host tool: the image carries what the run needs (and, for the lab's programs, nothing else)."""
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    built = image.build_workloads()
    for w in WORKLOADS.values():
        cmd = w.command(load_topology("ring-4"), 20)
        body = cmd.split("; do ", 1)[1] if cmd.startswith("end=") else cmd  # (repeated until the end: the loop's)
        first = body.split()[0]
        assert first in w.programs + w.tools, w.name
        assert len(w.programs) <= 1 and set(w.tools) <= set(image_layers.GUEST_TOOLS), w.name
        assert all((built / p).is_file() for p in image_layers.programs_for(w)), w.name


def test_a_workload_declaring_a_program_that_is_not_built_is_a_one_line_error(tmp_path, monkeypatch) -> None:
    from dataclasses import replace

    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    with pytest.raises(LabError, match="workload numa01: images/workloads builds no workload program 'stream'"):
        image_layers.programs_for(replace(get_workload("numa01"), programs=("stream",)))
    with pytest.raises(LabError, match="no workload program 'numalab-tracegrab'"):  # the base's, not a workload's
        image_layers.programs_for(replace(get_workload("idle"), programs=(image.TRACEGRAB,)))

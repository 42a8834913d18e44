"""The access-matrix plugin's host side: version -> API and address map, the plugin build, its output,
the self-check, metrics and the report (no VM; tests/vm/test_vm_access_matrix.py boots real ones)."""

from __future__ import annotations

import ctypes
import json
import os
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.analysis.access_counts import OUTSIDE_LIMIT, read_log, self_check, summarize
from lab.analysis.metrics import metric_values
from lab.errors import LabError
from lab.topology.model.topology import Node, Topology
from lab.vm.tcg import access_plugin as ap

MIB = 1 << 20
GIB = 1 << 30


def _topo(mem_mib: list[int], cpus: int = 1) -> Topology:
    n = len(mem_mib)
    nodes = tuple(Node(i, cpus, m) for i, m in enumerate(mem_mib))
    dist = tuple(tuple(10 if i == j else 20 for j in range(n)) for i in range(n))
    return Topology("t", nodes, dist)


@pytest.mark.parametrize(
    ("text", "api", "mode"),
    [
        ("QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7+deb12u18+b3)", 1, "ram-block"),
        ("QEMU emulator version 8.1.5", 1, "ram-block"),
        ("QEMU emulator version 8.2.0", 1, "guest-physical"),
        ("QEMU emulator version 9.0.0", 2, "guest-physical"),
        ("QEMU emulator version 10.1.0", 2, "guest-physical"),
    ],
)
def test_version_picks_plugin_api_and_address_map(text: str, api: int, mode: str) -> None:
    v = ap.parse_qemu_version(text)
    assert ap.plugin_api(v) == api
    assert ap.address_mode(v) == mode


def test_too_old_or_unknown_qemu_is_a_one_line_error() -> None:
    with pytest.raises(LabError, match="5.1 or later"):
        ap.plugin_api((5, 0))
    with pytest.raises(LabError, match="cannot tell the QEMU version"):
        ap.parse_qemu_version("")


def test_ram_block_map_puts_node_k_at_twice_its_base() -> None:
    """QEMU 5.1-8.1: the RAM block offset plus the region's container offset (both base_k)."""
    r = ap.node_ranges(_topo([512, 512, 256, 1024]), "ram-block")
    assert [(x.node, x.start, x.end) for x in r] == [
        (0, 0, 512 * MIB),
        (1, 1024 * MIB, 1536 * MIB),
        (2, 2048 * MIB, 2304 * MIB),
        (3, 2560 * MIB, 3584 * MIB),
    ]


def test_guest_physical_map_skips_the_pci_hole_on_q35() -> None:
    small = ap.node_ranges(_topo([512, 512]), "guest-physical")  # 1 GiB: all below lowmem
    assert [(x.node, x.start, x.end) for x in small] == [(0, 0, 512 * MIB), (1, 512 * MIB, GIB)]
    # 3 GiB >= 2.75 GiB: lowmem is 2 GiB, the rest from 4 GiB; node 1 straddles it.
    big = ap.node_ranges(_topo([1536, 1536]), "guest-physical")
    assert [(x.node, x.start, x.end) for x in big] == [
        (0, 0, 1536 * MIB),
        (1, 1536 * MIB, 2 * GIB),
        (1, 4 * GIB, 5 * GIB),
    ]
    # 2.5 GiB < 2.75 GiB: all of it below 4 GiB.
    assert ap.node_ranges(_topo([1280, 1280]), "guest-physical")[-1].end == 2560 * MIB


def test_plugin_argument_doubles_commas_in_paths() -> None:
    arg = ap.plugin_argument(Path("/a,b/x.so"), ap.node_ranges(_topo([256]), "ram-block"), ["out=/o,ut", "sample=64"])
    assert arg == "file=/a,,b/x.so,out=/o,,ut,sample=64,interval_ms=200,range=0:0:10000000"


@pytest.mark.parametrize("version", [(7, 2), (9, 0)])
def test_plugin_builds_with_the_host_compiler_for_the_api_qemu_asks(tmp_path, monkeypatch, version) -> None:
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path))
    so = ap.build_plugin(version)
    assert so.exists() and so.is_relative_to(tmp_path / "plugins")
    # The exported version is what QEMU checks; the qemu_plugin_* functions stay unresolved until QEMU loads it.
    lib = ctypes.CDLL(str(so), mode=os.RTLD_LAZY | os.RTLD_LOCAL)
    assert ctypes.c_int.in_dll(lib, "qemu_plugin_version").value == ap.plugin_api(version)
    assert ap.build_plugin(version) == so  # cached
    mtime = so.stat().st_mtime_ns
    assert ap.build_plugin(version).stat().st_mtime_ns == mtime


def _log(tmp_path: Path, snaps: list[tuple[int, list[int]]], end: bool = True, extra: str = "") -> Path:
    """A plugin output for 2 vCPUs (vCPU 0 on node 0, vCPU 1 on node 1) and 2 nodes: 5 numbers per vCPU."""
    lines = ["numalab-access-matrix 1", "api 1", "sample 64", "interval_ms 200", "vcpus 2", "nodes 2"]
    lines += ["range 0 0x0 0x10000000", "range 1 0x20000000 0x30000000"]
    for i, (t, c) in enumerate(snaps):
        tag = "end" if end and i == len(snaps) - 1 else "snap"
        lines.append(f"{tag} {t} " + " ".join(map(str, c)))
    path = tmp_path / "access-matrix.txt"
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


S = 1_000_000_000
SNAPS = [
    (10 * S, [0] * 10),
    (11 * S, [10, 0, 0, 1, 0, 0, 20, 0, 0, 0]),  # before the workload
    (12 * S, [110, 50, 0, 2, 0, 0, 120, 0, 0, 0]),
    (13 * S, [310, 50, 0, 3, 0, 100, 220, 0, 0, 0]),
    (14 * S, [400, 50, 0, 3, 0, 100, 320, 0, 0, 0]),  # after it
]


def test_summary_is_cut_to_the_workload_window(tmp_path) -> None:
    log = read_log(_log(tmp_path, SNAPS))
    s = summarize(log, [0, 1], start_ns=11 * S + S // 2, end_ns=12 * S + S // 2)
    # Last snapshot <= start (11 s) to first >= end (13 s).
    assert s["matrix"] == [[300, 50], [100, 200]]
    assert s["local_pct"] == round(100 * 500 / 650, 2)
    assert s["window_s"] == [-0.5, 1.5]
    assert [x["t"] for x in s["series"]] == [0.5, 1.5]
    assert s["series"][0]["matrix"] == [[100, 50], [0, 100]]
    assert s["series"][1]["local_pct"] == round(100 * 300 / 400, 2)
    assert s["io"] == 2 and s["outside"] == 0 and s["complete"]
    assert s["per_vcpu"] == [[300, 50], [100, 200]]
    assert self_check(s) is None


def test_without_stage_stamps_the_whole_log_counts(tmp_path) -> None:
    s = summarize(read_log(_log(tmp_path, SNAPS)), [0, 1], None, None)
    assert s["matrix"] == [[400, 50], [100, 320]] and not s["window_from_stages"]


def test_outside_accesses_fail_the_self_check(tmp_path) -> None:
    snaps = [(10 * S, [0] * 10), (11 * S, [100, 0, 50, 0, 0, 0, 100, 0, 0, 0])]
    s = summarize(read_log(_log(tmp_path, snaps, extra="outside-first 0x5fb97015\n")), [0, 1], None, None)
    assert s["outside_share"] == 0.2 > OUTSIDE_LIMIT
    reason = self_check(s)
    assert reason and "outside every node" in reason and "0x5fb97015" in reason
    nothing = summarize(read_log(_log(tmp_path, [(10 * S, [0] * 10)])), [0, 1], None, None)
    assert "no guest memory access" in self_check(nothing)


def test_a_killed_qemu_leaves_a_readable_log(tmp_path) -> None:
    path = _log(tmp_path, SNAPS[:3], end=False, extra="snap 15000000000 1 2 3")  # cut mid-line
    log = read_log(path)
    assert len(log.snaps) == 3 and not log.ended


@pytest.mark.parametrize(
    ("text", "needle"),
    [("", "not an access-matrix file"), ("numalab-access-matrix 1\napi 1\n", "no counts"),
     ("numalab-access-matrix 1\nsample 64\ninterval_ms 200\nvcpus 2\nnodes 2\nsnap 1 2 3\nsnap 2 3 4\n", ":6:")],
)  # fmt: skip
def test_malformed_logs_are_one_line_errors_naming_the_file(tmp_path, text: str, needle: str) -> None:
    path = tmp_path / "access-matrix.txt"
    path.write_text(text)
    with pytest.raises(LabError, match=needle) as err:
        read_log(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_instrumented_runs_give_access_local_but_no_throughput_or_times() -> None:
    base = {
        "workload": {"result": {"gbps": 1.5, "elapsed_s": 6.0}},
        "timings": {"boot_s": 3.0},
        "metrics": {"vmstat": {"numa_hint_faults": 10, "numa_hint_faults_local": 9, "hint_local_pct": 90.0}},
    }
    plain = metric_values(base)
    assert plain["workload.gbps"] == 1.5 and "access_local_pct" not in plain
    inst = metric_values(base | {"access_matrix": {"local_pct": 77.5}})
    assert inst["access_local_pct"] == 77.5 and inst["vmstat.hint_local_pct"] == 90.0
    assert not any(k.startswith(("workload.", "timings.")) for k in inst)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--access-sample", "8"], "--access-sample: only with --access-matrix"),
        (["--access-matrix", "--access-sample", "0"], "--access-sample: must be >= 1"),
        (["--access-matrix", "--accel", "kvm"], "--access-matrix: needs TCG"),
        (
            ["--access-matrix", "--backend", "libvirt", "--connect", "qemu+ssh://lab@box2.invalid/system"],
            "--access-matrix: not with the remote libvirt host qemu+ssh://lab@box2.invalid/system",
        ),
    ],
)
def test_cli_refuses_what_the_plugin_cannot_do(tmp_path, args: list[str], needle: str) -> None:
    out = tmp_path / "run"
    proc = numalab("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--out", str(out), *args)
    assert_one_line_error(proc, needle)
    assert proc.returncode == 2 and not out.exists()


def test_report_shows_heatmap_timeline_and_slowdown(tmp_path) -> None:
    from lab.report.report_model import build_report

    src = Path(__file__).resolve().parents[1] / "data" / "runs" / "ring4-numa01-on-1"
    manifest = json.loads((src / "manifest.json").read_text())
    gbps = manifest["workload"]["result"]["gbps"]
    runs = []
    for name, access in (("plain", None), ("inst", {"local_pct": 80.0, "matrix": [[8, 1], [1, 8]]})):
        d = tmp_path / name
        d.mkdir()
        for f in src.iterdir():
            (d / f.name).symlink_to(f)
        (d / "manifest.json").unlink()
        m = json.loads(json.dumps(manifest))
        m["run_id"] = name
        if access:
            m["workload"]["result"]["gbps"] = gbps / 4
            m["access_matrix"] = access | {
                "plugin": {"sample": 64},
                "accesses": 18,
                "window_s": [0, 10],
                "interval_ms": 200,
                "series": [{"t": 0.2, "local_pct": 50.0}, {"t": 0.4, "local_pct": 90.0}],
                "problem": None,
            }
        (d / "manifest.json").write_text(json.dumps(m))
        runs.append(d)
    paths = build_report(runs, tmp_path / "report.html")
    html = paths.html.read_text()
    assert "Memory accesses by node" in html and "accesses by node" in html
    assert "local % over time" in html and "hint local %" in html
    assert "slowed the workload 4x" in html
    data = json.loads(paths.json.read_text())
    inst = next(r for r in data["runs"] if r["run_id"] == "inst")
    assert inst["access_matrix"]["slowdown"]["factor"] == 4.0
    assert inst["group"].endswith("access-matrix")
    plain = next(r for r in data["runs"] if r["run_id"] == "plain")
    assert plain["access_matrix"] is None and not plain["group"].endswith("access-matrix")


def test_host_tsc_frequency_comes_from_the_host_kernel_log(monkeypatch) -> None:
    """Instrumented guests (like every TCG guest: lab.vm.tcg.tcg_boot) are told the host's TSC frequency."""
    from lab.vm.tcg import tcg_clock
    from lab.vm.tcg.tcg_clock import host_tsc_khz

    log = "[    0.000059] tsc: Detected 2299.998 MHz processor\n"
    assert host_tsc_khz(log) == 2299998
    refined = log + "[    1.5] tsc: Refined TSC clocksource calibration: 2300.012 MHz\n"
    assert host_tsc_khz(refined) == 2300012
    assert host_tsc_khz("nothing here") is None
    monkeypatch.setattr(tcg_clock, "host_tsc_khz", lambda dmesg=None: 2299998)
    assert tcg_clock.clock_args() == "tsc_early_khz=2299998"


def _plugin(tmp_path: Path, snaps) -> ap.AccessPlugin:
    out = _log(tmp_path, snaps)
    return ap.AccessPlugin("file=x", out.parent, 1, "ram-block", "QEMU emulator version 7.2.22", ())


def _collect(run_dir: Path, plugin: ap.AccessPlugin, start_ns, end_ns, guest_s, virtual: bool = False):
    """The access matrix's counts collected as a run does (lab.run.instrument)."""
    from lab.run.access_matrix import AccessMatrix
    from lab.run.instrument import Window

    return AccessMatrix(_topo([256, 256]), 64).collect(run_dir, plugin, Window(start_ns, end_ns, guest_s, virtual))


@pytest.mark.parametrize(
    ("snaps", "guest_s", "status", "needle"),
    [
        (SNAPS, 1.0, "ok", None),
        (SNAPS, 20.0, "guest-clock-skew", "guest clock ran 20.00x"),
        (SNAPS, 2.9, "ok", None),  # stage marks seen late (libvirt's mirrored console): not a clock fault
        (SNAPS, 3.5, "guest-clock-skew", "guest clock ran 3.50x"),
        ([(10 * S, [0] * 10), (13 * S, [100, 0, 50, 0, 0, 0, 100, 0, 0, 0])], 1.0, "access-map-mismatch", "outside"),
    ],
)
def test_measure_fills_the_manifest_and_fails_untrustworthy_runs(tmp_path, snaps, guest_s, status, needle) -> None:
    from lab.run.manifest import add_instrument

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    manifest = {"status": "ok", "reason": "fine", "timings": {"workload_s": guest_s}, "files": ["manifest.json"]}
    found = _collect(run_dir, _plugin(tmp_path, snaps), 11 * S + S // 2, 12 * S + S // 2, guest_s)
    add_instrument(manifest, found)
    assert manifest["status"] == status
    a = manifest["access_matrix"]
    assert json.loads((run_dir / "access-matrix.json").read_text()) == a
    assert (run_dir / "access-matrix.txt").read_text() == (tmp_path / "access-matrix.txt").read_text()
    assert {"access-matrix.json", "access-matrix.txt"} <= set(manifest["files"])
    assert a["guest_clock_ratio"] == guest_s
    if needle:
        assert needle in manifest["reason"] and a["problem"] == manifest["reason"]
    else:
        assert a["problem"] is None and manifest["reason"] == "fine"


def test_under_the_virtual_clock_the_guests_clock_follows_no_host_clock(tmp_path) -> None:
    """--clock virtual --access-matrix (numalab's QEMU): 4 guest seconds took 64 host seconds in a real run,
    which is no clock fault there (it failed every such run as guest-clock-skew)."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    found = _collect(run_dir, _plugin(tmp_path, SNAPS), 11 * S + S // 2, 12 * S + S // 2, 0.06, virtual=True)
    assert found.failure is None and found.section["problem"] is None and found.section["guest_clock_ratio"] == 0.06


def test_measure_keeps_a_failed_guests_status_and_notes_missing_counts(tmp_path) -> None:
    from lab.run.manifest import add_instrument

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    plugin = ap.AccessPlugin("file=x", tmp_path / "never-written", 1, "ram-block", "7.2", ())
    manifest = {"status": "panic", "reason": "Kernel panic", "timings": {}}
    add_instrument(manifest, _collect(run_dir, plugin, None, None, None))
    assert manifest["status"] == "panic" and "cannot read" in manifest["access_matrix"]["problem"]


def test_the_plugin_reaches_the_qemu_command_line_only_when_asked() -> None:
    from dataclasses import replace

    from common import BOOT, HOST

    from lab.placement.pinning import Backing, plan_placement
    from lab.vm.qemu.qemu_argv import qemu_argv

    topo = _topo([256, 256])
    placement = plan_placement(topo, HOST, Backing())
    assert "-plugin" not in qemu_argv(topo, placement, BOOT)
    argv = qemu_argv(topo, placement, replace(BOOT, plugin="file=/x.so,out=/y"))
    assert argv[argv.index("-plugin") + 1] == "file=/x.so,out=/y"


def test_run_summary_names_the_access_local_share() -> None:
    from lab.run.access_matrix import summary_lines

    assert summary_lines({}) == []
    line = summary_lines({"access_matrix": {"local_pct": 88.3, "accesses": 1234, "plugin": {"sample": 64}}})
    assert "access-local=88.3%" in line[0] and "1/64" in line[0]
    assert "outside" in summary_lines({"access_matrix": {"problem": "access matrix: 27% outside"}})[0]


def test_relocating_the_plugin_for_a_libvirt_host_keeps_the_rest() -> None:
    arg = ap.plugin_argument(
        Path("/c,x/a.so"), [ap.NodeRange(0, 0, 16)], ["out=/tmp/o,1/access-matrix.txt", "sample=8"]
    )
    assert ap.split_argument(arg)[:2] == ["file=/c,x/a.so", "out=/tmp/o,1/access-matrix.txt"]
    moved = ap.relocate(arg, "/var/lib/libvirt/numalab/r.plugin.so", "/var/lib/libvirt/numalab/r,s/access-matrix.txt")
    assert moved == (
        "file=/var/lib/libvirt/numalab/r.plugin.so,out=/var/lib/libvirt/numalab/r,,s/access-matrix.txt,"
        "sample=8,interval_ms=200,range=0:0:10"
    )


def test_libvirt_domain_passes_the_plugin_through_and_validates(tmp_path) -> None:
    import xml.etree.ElementTree as ET
    from dataclasses import replace

    from common import BOOT, HOST
    from test_libvirt_xml import validate

    from lab.placement.pinning import Backing, plan_placement
    from lab.vm.libvirt.libvirt_xml import QEMU_NS, domain_xml

    topo = _topo([256, 256])
    placement = plan_placement(topo, HOST, Backing())
    assert "qemu:commandline" not in domain_xml(topo, placement, BOOT)
    xml = domain_xml(topo, placement, replace(BOOT, plugin="file=/x.so,out=/y,sample=64"))
    args = [a.get("value") for a in ET.fromstring(xml).iter(f"{{{QEMU_NS}}}arg")]
    assert args == ["-plugin", "file=/x.so,out=/y,sample=64"]
    validate(xml, tmp_path)

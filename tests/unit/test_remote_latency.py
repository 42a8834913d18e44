"""--remote-latency's host side: the model and its plugin arguments, the plugin's cache model and charges fed
by a stand-in for QEMU (tests/data/plugin_harness.c), the counts' reader and the manifest section (no VM;
tests/vm/test_vm_remote_latency.py boots real ones)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from lab.errors import LabError
from lab.matrix.definition import parse_matrix, run_options_of
from lab.run import remote_latency as rl
from lab.topology.model.topology import Node, Topology
from lab.vm.tcg import access_plugin as ap
from lab.vm.tcg.latency_model import LatencyModel, model_for

REPO = Path(__file__).resolve().parents[2]
MIB = 1 << 20


def _topo(dist: int = 20, cpus: int = 1) -> Topology:
    return Topology("t", (Node(0, cpus, 256), Node(1, cpus, 256)), ((10, dist), (dist, 10)))


def test_model_of_the_slit_and_its_plugin_arguments(tmp_path) -> None:
    m = model_for(_topo(30, cpus=2), "slit", 80.0)
    assert m is not None and m.ratios == ((1.0, 3.0), (3.0, 1.0)) and m.vcpu_nodes == (0, 0, 1, 1)
    assert m.cost_ps(0, 1) == 160000 and m.cost_ps(0, 0) == 0  # (3 - 1) x 80 ns
    args = m.plugin_args(tmp_path / "o")
    assert args == [f"lat_out={tmp_path / 'o'}", "lines=4096", "ways=8", "lat_sample=16", "chunk_ns=20000",
                    "vnode=0:1:0", "vnode=2:3:1", "cost=0:1:160000", "cost=1:0:160000"]  # fmt: skip
    d = m.to_dict()
    assert d["cache_kib"] == 256 and d["charge_ns"] == [[0.0, 160.0], [160.0, 0.0]] and d["local_ns"] == 80.0
    assert model_for(_topo(), "off") is None
    with pytest.raises(LabError, match="--remote-latency-ns: must be more than 0"):
        model_for(_topo(), "slit", -1.0)


def _model_of(opts, topo):
    """The model of the memory charge that ``opts`` ask for on ``topo`` (None: off), as a run has it."""
    charge = rl.RemoteLatency.asked(opts.latency, opts.guest_time, topo)
    return None if charge is None else charge.model


def test_plugin_argument_without_the_access_matrix(tmp_path) -> None:
    extra = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 50.0, (0, 1)).plugin_args(Path("/t,x/lat"))
    arg = ap.plugin_argument(Path("/p.so"), [ap.NodeRange(0, 0, 16)], extra)
    assert arg.startswith("file=/p.so,interval_ms=200,range=0:0:10,lat_out=/t,,x/lat,lines=4096,")
    assert "out=" not in arg.replace("lat_out=", "") and "sample=" not in arg.replace("lat_sample=", "")


@pytest.fixture(scope="module")
def harness(tmp_path_factory) -> tuple[Path, Path]:
    if shutil.which("gcc") is None:
        pytest.skip("no gcc")
    d = tmp_path_factory.mktemp("harness")
    so = ap.build_plugin((7, 2))
    exe = d / "plugin_harness"
    for name, flags in ((exe, []), (d / "plugin_harness_charge", ["-DWITH_CHARGE"]),
                        (d / "plugin_harness_line", ["-DWITH_CHARGE", "-DWITH_LINE_CB"]),
                        (d / "plugin_harness_clock", ["-DWITH_CHARGE", "-DWITH_VCPU_CLOCK"])):  # fmt: skip
        subprocess.run(["gcc", "-O2", "-rdynamic", *flags, "-o", str(name), str(REPO / "tests/data/plugin_harness.c"),
                        "-ldl"], check=True, capture_output=True)  # fmt: skip
    return so, exe


def _feed(harness, tmp_path: Path, vcpu: int, start: int, nbytes: int, passes: int) -> tuple[dict, int]:
    """The plugin fed one vCPU's loads, every 64 bytes of [start, start + nbytes), ``passes`` times: the
    summary of its counts and the CPU time the feeding thread took."""
    s, out = _feed_model(harness, tmp_path, LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1)), vcpu, start,
                         nbytes, passes)  # fmt: skip
    return s, out["thread_cpu_ns"]


def _feed_model(harness, tmp_path: Path, model: LatencyModel, vcpu: int, start: int, nbytes: int, passes: int,
                exe: Path | None = None, stride: int = 64, twin: int = 0,
                env: dict[str, str] | None = None) -> tuple[dict, dict[str, int]]:  # fmt: skip
    so, plain = harness
    out = tmp_path / "lat.txt"
    parts = [r.arg() for r in ap.node_ranges(_topo(), "guest-physical")] + model.plugin_args(out)
    proc = subprocess.run([str(exe or plain), str(so), str(vcpu), f"{start:x}", str(nbytes), str(stride),
                           str(passes), *parts], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HARNESS_TWIN": f"{twin:x}", **(env or {})})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    log = rl.read_log(out)
    assert log.ended and log.head["lat_sample"] == 16 and log.vcpu_nodes == list(model.vcpu_nodes)
    return rl.summarize(log, None, None), {w[0]: int(w[1]) for w in map(str.split, proc.stdout.splitlines())}


def test_under_the_virtual_clock_every_miss_is_charged_to_the_clock_not_the_vcpu(harness, tmp_path) -> None:
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual")
    assert model.cost_ps(0, 0) == 100_000 and model.cost_ps(0, 1) == 200_000  # L local, ratio x L remote
    charging = harness[1].with_name("plugin_harness_charge")
    lines = 16 * MIB // 64
    s, out = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 16 * MIB, 1, charging)  # node 1's memory
    v = s["whole_run"]["per_vcpu"][0]
    assert v["misses"][1] == lines // 16 and v["charged_ns"] == lines * 200
    assert out["clock_charged_ns"] == v["held_ns"] and v["charged_ns"] - 1000 <= v["held_ns"] <= v["charged_ns"]
    assert out["thread_cpu_ns"] < v["charged_ns"] / 2  # not paid by spinning: 52 ms charged
    s, out = _feed_model(harness, tmp_path, model, 0, 0, 16 * MIB, 1, charging)  # its own node's: L each
    assert s["whole_run"]["per_vcpu"][0]["charged_ns"] == lines * 100
    assert rl.read_log(tmp_path / "lat.txt").head["lat_virtual"] == 1


def test_the_virtual_clock_charge_needs_a_qemu_that_can_take_it(harness, tmp_path) -> None:
    so, plain = harness  # the plain harness is a QEMU without qemu_plugin_charge_ns
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), clock="virtual")
    parts = [r.arg() for r in ap.node_ranges(_topo(), "guest-physical")] + model.plugin_args(tmp_path / "lat.txt")
    proc = subprocess.run([str(plain), str(so), "0", "0", "64", "64", "1", *parts], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert proc.returncode != 0 and "this QEMU has no qemu_plugin_charge_ns" in proc.stderr


def test_under_the_virtual_clock_the_model_starts_at_the_mark_and_not_before(harness, tmp_path) -> None:
    """arm=mark: nothing is instrumented until a vCPU executes numalab-model-start's instruction; then the plugin
    resets (QEMU flushes the translated code) and counts and charges every access from there on."""
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual")
    assert model.from_workload and "arm=mark" in model.plugin_args(tmp_path / "o")
    assert model.to_dict()["starts"] == "at the workload's start (the boot is not modelled)"
    charging = harness[1].with_name("plugin_harness_charge")
    lines = 16 * MIB // 64  # one load a line of node 1's memory; the mark executed before load 0, half, never
    got = {}
    for at in (0, lines // 2, -1):
        s, out = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 16 * MIB, 1, charging,
                             env={"HARNESS_MARK_AT": str(at)})  # fmt: skip
        got[at] = (s["whole_run"]["per_vcpu"][0], out)
        assert s["from_workload"] and out["resets"] == (at >= 0)
    assert got[0][0]["misses"][1] == lines // 16 and got[0][0]["charged_ns"] == lines * 200  # (1 set in 16 looked up)
    half = got[lines // 2][0]
    assert half["misses"][1] == lines // 32 and half["charged_ns"] == lines // 2 * 200
    assert got[lines // 2][1]["clock_charged_ns"] == got[lines // 2][0]["held_ns"]
    assert got[-1][0]["looked_up"] == 0 and got[-1][1]["clock_charged_ns"] == 0
    # a run whose model never started is a failure, said (not a run with no remote memory)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    res = rl.measure(run_dir, tmp_path / "lat.txt", model, None, None)
    assert res.failure and "the model never started" in res.failure[1]
    host = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1))  # the host's clock: from the boot on, as before
    assert not host.from_workload and "arm=mark" not in host.plugin_args(tmp_path / "o")


def test_the_mark_needs_a_qemu_with_plugin_api_3(harness, tmp_path) -> None:
    so, exe = harness
    args = [str(exe), str(so), "0", "0", "64", "64", "1", "range=0:0:1000", f"lat_out={tmp_path / 'x'}", "arm=mark"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, env={**os.environ, "HARNESS_API": "2"})
    assert proc.returncode == 1 and "arm=mark: needs a QEMU whose plugin API is version 3 or more" in proc.stderr


def test_remote_misses_are_charged_and_the_vcpu_held(harness, tmp_path) -> None:
    # 16 MiB of node 1 read once by node 0's vCPU: every line a miss; 1 set in 16 modelled, each miss charged 16x.
    s, cpu_ns = _feed(harness, tmp_path, 0, 256 * MIB, 16 * MIB, 1)
    v = s["whole_run"]["per_vcpu"][0]
    lines = 16 * MIB // 64
    assert v["looked_up"] == v["misses"][1] == lines // 16 and v["hits"] == 0 and v["other_misses"] == 0
    charged = lines * 100  # ns: (2 - 1) x 100 ns per line
    assert v["charged_ns"] == charged
    assert charged - 20000 <= v["held_ns"] <= charged + 2_000_000  # paid by 20 µs chunks, overshoot credited
    assert cpu_ns >= v["held_ns"]  # the vCPU's thread spent it
    assert s["whole_run"]["remote_miss_pct"] == 100.0 and s["other_share"] == 0.0


def test_a_working_set_in_the_modelled_cache_misses_once(harness, tmp_path) -> None:
    # 128 KiB (half the 256 KiB cache) of remote memory read 10 times: only the first pass misses.
    s, _ = _feed(harness, tmp_path, 0, 256 * MIB, 128 * 1024, 10)
    v = s["whole_run"]["per_vcpu"][0]
    per_pass = v["looked_up"] // 10
    assert v["looked_up"] == 10 * per_pass and 64 <= per_pass <= 192  # ~2048 lines / 16
    assert v["misses"] == [0, per_pass] and v["hits"] == 9 * per_pass
    assert v["charged_ns"] == per_pass * 16 * 100


def test_local_misses_cost_nothing_and_unmapped_ones_are_other(harness, tmp_path) -> None:
    s, _ = _feed(harness, tmp_path, 1, 256 * MIB, 1 * MIB, 1)  # node 1's vCPU, its own memory
    v = s["whole_run"]["per_vcpu"][1]
    assert v["misses"][1] == v["looked_up"] > 0 and v["charged_ns"] == 0 and v["held_ns"] == 0
    s, _ = _feed(harness, tmp_path, 0, 1024 * MIB, 1 * MIB, 1)  # in no node's range: a wrong address map
    assert s["other_share"] == 1.0 and s["whole_run"]["charged_s"] == 0


def test_mmio_is_counted_apart_and_not_taken_for_a_wrong_map(harness, tmp_path) -> None:
    # The LAPIC page, written for every IPI under TCG's xAPIC (seen as ~5% of pairs' accesses on ring-2):
    # MMIO is neither cached nor charged, and is not a wrong address map.
    s, _ = _feed(harness, tmp_path, 0, 0xFEE00000, 1 * MIB, 1)
    v = s["whole_run"]["per_vcpu"][0]
    assert v["io_accesses"] == v["looked_up"] > 0 and v["misses"] == [0, 0] and v["other_misses"] == 0
    assert s["io_share"] == 1.0 and s["other_share"] == 0.0 and s["whole_run"]["charged_s"] == 0


def test_a_stream_pays_the_bandwidth_and_a_strided_walk_the_latency(harness, tmp_path) -> None:
    # Under the virtual clock, L = 100 ns, 10 GB/s local: a local line streams in 6.4 ns, a remote one
    # (bandwidth ratio = latency ratio 2) in 12.8 ns. Node 0's vCPU reads 16 MiB of node 1's memory.
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", local_gbs=10.0)
    assert (model.stream_cost_ps(0, 0), model.stream_cost_ps(0, 1)) == (6400, 12800)
    assert model.plugin_args(Path("o"))[-5:] == ["stream=1", "bw=0:0:6400", "bw=0:1:12800", "bw=1:0:12800",
                                                 "bw=1:1:6400"]  # fmt: skip
    charging = harness[1].with_name("plugin_harness_charge")
    lines = 16 * MIB // 64
    # every line in turn: each miss but the very first continues the stream (its line below was just read)
    s, out = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 16 * MIB, 1, charging)
    v = s["whole_run"]["per_vcpu"][0]
    assert v["misses"][1] == lines // 16 and v["stream_misses"] in (lines // 16, lines // 16 - 1)
    first = v["misses"][1] - v["stream_misses"]
    assert v["charged_ns"] == 16 * (first * 200_000 + v["stream_misses"] * 12_800) // 1000  # (ps to ns)
    assert out["clock_charged_ns"] == v["held_ns"] and s["whole_run"]["stream_miss_pct"] >= 99.9
    assert rl.read_log(tmp_path / "lat.txt").head["stream"] == 1
    # every other line: no miss has a neighbour just touched, so each pays the latency, 2 x 100 ns
    s, out = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 16 * MIB, 1, charging, stride=128)
    v = s["whole_run"]["per_vcpu"][0]
    assert v["stream_misses"] == 0 and lines // 64 < v["misses"][1] < lines // 16
    assert v["charged_ns"] == 16 * v["misses"][1] * 200
    # the detector off (local_gbs 0, the model before it): the same stream pays the latency on every line
    off = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual")
    s, _ = _feed_model(harness, tmp_path, off, 0, 256 * MIB, 16 * MIB, 1, charging)
    v = s["whole_run"]["per_vcpu"][0]
    assert v["stream_misses"] == 0 and v["charged_ns"] == lines * 200 and "stream=1" not in off.plugin_args(Path("o"))


def test_the_line_callback_skips_repeats_of_a_line_and_charges_the_same(harness, tmp_path) -> None:
    # images/qemu/0005: the patched QEMU calls the plugin only when a vCPU's access is to another line than its
    # last. 16 MiB of node 1 streamed 8 bytes at a time, then copied 16 bytes at a time from a source 4 MiB away
    # (alternate lines, nothing to skip): the misses, streams and charges are those of every access passed on.
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", local_gbs=10.0)
    charging, line = (harness[1].with_name(n) for n in ("plugin_harness_charge", "plugin_harness_line"))
    lines = 16 * MIB // 64
    for stride, twin, skipped in ((8, 0, lines * 7), (16, 4 * MIB, 0)):
        every, out_every = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 16 * MIB, 1, charging, stride, twin)
        assert rl.read_log(tmp_path / "lat.txt").head["line_cb"] == 0
        changes, out = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 16 * MIB, 1, line, stride, twin)
        assert rl.read_log(tmp_path / "lat.txt").head["line_cb"] == 1 and out["line_cb_skipped"] == skipped
        a, b = every["whole_run"]["per_vcpu"][0], changes["whole_run"]["per_vcpu"][0]
        for key in ("misses", "stream_misses", "other_misses", "charged_ns", "held_ns"):
            assert a[key] == b[key], key
        assert out["clock_charged_ns"] == out_every["clock_charged_ns"] > 0
        # looked up: every access to a modelled set, or each change of line only (the stream's 8 a line: 1)
        assert b["looked_up"] == (a["looked_up"] if twin else a["looked_up"] // 8)
    # line_cb=0, or the access matrix's out= (every Nth access), keeps every access
    parts = [r.arg() for r in ap.node_ranges(_topo(), "guest-physical")] + model.plugin_args(tmp_path / "lat.txt")
    for extra in (["line_cb=0"], [f"out={tmp_path / 'matrix.txt'}", "sample=1"]):
        proc = subprocess.run([str(line), str(harness[0]), "0", f"{256 * MIB:x}", str(MIB), "8", "1", *parts,
                               *extra], capture_output=True, text=True, timeout=60)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert rl.read_log(tmp_path / "lat.txt").head["line_cb"] == 0 and "line_cb_skipped 0" in proc.stdout
    bad = subprocess.run([str(line), str(harness[0]), "0", "0", "64", "64", "1", *parts, "line_cb=2"],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode != 0 and "bad line_cb (want 0 or 1): line_cb=2" in bad.stderr


def test_a_copy_whose_arrays_share_the_sets_misses_once_a_line(harness, tmp_path) -> None:
    # A copy's source and destination 4 MiB apart (a multiple of the 256 KiB cache: every line's set shared),
    # 16 bytes at a time: a direct-mapped model (ways=1) alone misses on all 8 accesses to each pair of lines; with
    # the detector, a line among the vCPU's last 8 touched is a hit, so each line misses once, as a stream.
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", local_gbs=10.0)
    charging = harness[1].with_name("plugin_harness_charge")
    lines = 4 * MIB // 64
    s, _ = _feed_model(harness, tmp_path, model, 0, 256 * MIB, 4 * MIB, 1, charging, stride=16, twin=4 * MIB)
    v = s["whole_run"]["per_vcpu"][0]
    assert v["misses"][1] == 2 * lines // 16 and v["hits"] == v["looked_up"] - v["misses"][1]
    assert v["misses"][1] - 2 <= v["stream_misses"] <= v["misses"][1]
    off = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", ways=1)
    s, _ = _feed_model(harness, tmp_path, off, 0, 256 * MIB, 4 * MIB, 1, charging, stride=16, twin=4 * MIB)
    v = s["whole_run"]["per_vcpu"][0]
    assert v["misses"][1] == v["looked_up"] == 8 * lines // 16 and v["hits"] == 0
    # Without the detector but with the cache's 8 ways (the default), the two lines of a set both stay: once a line.
    s, _ = _feed_model(harness, tmp_path, replace(off, ways=8), 0, 256 * MIB, 4 * MIB, 1, charging, stride=16,
                       twin=4 * MIB)  # fmt: skip
    v = s["whole_run"]["per_vcpu"][0]
    assert v["misses"][1] == 2 * lines // 16 and v["looked_up"] == 8 * lines // 16 and v["stream_misses"] == 0


def _streams(harness, tmp_path: Path, model: LatencyModel, peer_start: int | None) -> tuple[dict, dict[str, int]]:
    """vCPU 0 streams 16 MiB of node 0's memory (64 B a line, an instruction each), and with ``peer_start`` vCPU 1
    16 MiB from there at the same time, a quantum of 2 us of guest time at a turn (parallel guest time)."""
    env = {"HARNESS_QUANTUM_NS": "2000"} | ({"HARNESS_PEER": f"1:{peer_start:x}"} if peer_start is not None else {})
    clock = harness[1].with_name("plugin_harness_clock")
    return _feed_model(harness, tmp_path, model, 0, 0, 16 * MIB, 1, clock, env=env)


def test_two_streams_on_one_node_share_its_bandwidth_and_on_two_nodes_do_not(harness, tmp_path) -> None:
    # Under the virtual clock, 10 GB/s local (a line in 6.4 ns), each node's total 10 GB/s too, shared in windows of
    # 5 us of each vCPU's own guest time (images/qemu/0008 reads it; the stand-in's is its accesses plus charges).
    both_on_0 = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 0), chunk_ns=1000, clock="virtual", local_gbs=10.0,
                             share_window_ns=5000)  # fmt: skip
    assert both_on_0.shared and both_on_0.plugin_args(Path("o"))[-3:] == ["share_ns=5000", "node_bw=0:6400",
                                                                          "node_bw=1:6400"]  # fmt: skip
    assert both_on_0.to_dict()["streams"]["contention"]["node_gbs"] == [10.0, 10.0]
    alone, out = _streams(harness, tmp_path, both_on_0, None)
    one = out["vcpu_time_ns_0"]
    a = alone["whole_run"]["per_vcpu"][0]
    assert a["shared_misses"] == 0 and a["stream_misses"] >= a["misses"][0] - 1
    assert rl.read_log(tmp_path / "lat.txt").head["share_ns"] == 5000
    # Two vCPUs of node 0 stream node 0's memory at once. Each gets what the other leaves of 10 GB/s, at least
    # half: with an instruction's 1 ns a line, A = 10 - 64 A / (A + 64) GB/s, so A = 5.2 and a line takes
    # 1 + 64 / 5.2 = 13.3 ns against 7.4 alone: 0.56 of one each.
    two, out = _streams(harness, tmp_path, both_on_0, 128 * MIB)
    for v in (0, 1):
        r = two["whole_run"]["per_vcpu"][v]
        assert r["shared_misses"] >= 0.95 * r["stream_misses"] > 0, r
        assert 0.5 <= one / out[f"vcpu_time_ns_{v}"] <= 0.6, (v, one, out)
    again, out_again = _streams(harness, tmp_path, both_on_0, 128 * MIB)
    assert again == two and out_again["vcpu_time_ns_1"] == out["vcpu_time_ns_1"]  # guest time only: the same
    # One vCPU on each node, each streaming its own node's memory: nothing shared, each as fast as alone.
    own_nodes = replace(both_on_0, vcpu_nodes=(0, 1))
    apart, out = _streams(harness, tmp_path, own_nodes, 256 * MIB)
    clock = harness[1].with_name("plugin_harness_clock")
    _, lone1 = _feed_model(harness, tmp_path, own_nodes, 1, 256 * MIB, 16 * MIB, 1, clock)  # vCPU 1 alone
    assert out["vcpu_time_ns_0"] == one and out["vcpu_time_ns_1"] == lone1["vcpu_time_ns_1"]
    assert [apart["whole_run"]["per_vcpu"][v]["shared_misses"] for v in (0, 1)] == [0, 0]
    # The window 0 (the model before contention): two on one node each as fast as alone.
    unshared = replace(both_on_0, share_window_ns=0)
    assert not unshared.shared and "share_ns=" not in " ".join(unshared.plugin_args(Path("o")))
    _, out = _streams(harness, tmp_path, unshared, 128 * MIB)
    _, lone1 = _feed_model(harness, tmp_path, unshared, 1, 128 * MIB, 16 * MIB, 1, clock)
    assert out["vcpu_time_ns_0"] == one and out["vcpu_time_ns_1"] == lone1["vcpu_time_ns_1"]


def _pair(harness, tmp_path: Path, model: LatencyModel, exe: str, start: int, peer: int, nbytes: int, passes: int,
          **env: str) -> tuple[list[dict], dict[str, int]]:  # fmt: skip
    """vCPU 0 (node 0) and vCPU 1 (node 1) at once, a quantum of 2 us of guest time at a turn, each over ``nbytes``
    from its start (8 bytes an access): per vCPU its counts, and the harness's figures."""
    env = {"HARNESS_QUANTUM_NS": "2000", "HARNESS_PEER": f"1:{peer:x}"} | env
    s, out = _feed_model(harness, tmp_path, model, 0, start, nbytes, passes, harness[1].with_name(exe), stride=8,
                         env=env)  # fmt: skip
    return s["whole_run"]["per_vcpu"], out


def _first_miss_ns(model: LatencyModel, row: dict) -> int:
    """What a vCPU's misses were charged (a handed line's first one, when its set is among the sampled ones)."""
    node = model.vcpu_nodes[row["vcpu"]]
    return sum(m * model.cost_ps(node, j) * model.sample for j, m in enumerate(row["misses"])) // 1000


def _but_lookups(rows: list[dict]) -> list[dict]:
    """The rows without looked-up accesses and hits (the line callback's count changes of line only)."""
    return [{k: x for k, x in r.items() if k not in ("looked_up", "hits")} for r in rows]


def test_a_counter_handed_between_nodes_moves_it_each_turn_and_private_counters_nothing(harness, tmp_path) -> None:
    # Coherence (issue 52): a line written on one node and then read or written on another is a transfer, charged
    # the pair's miss cost (here 2 x 100 ns of guest time, paid at once); L = 100 ns, SLIT 20.
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", coherence=True)
    assert (model.transfer_ps(1, 0), model.transfer_ps(0, 1), model.transfer_ps(1, 1)) == (200_000, 200_000, 0)
    assert model.plugin_args(Path("o"))[-2:] == ["coherence=1", "coh_lines=524288"]  # 32 MiB a node
    assert model.to_dict()["coherence"]["transfer_ns"] == [[0.0, 200.0], [200.0, 0.0]]
    assert model.to_dict()["coherence"]["node_cache_mib"] == [32, 32] and model.to_dict()["coherence"]["llc_mib"] == 32
    counter, private, per_turn = 0x10000, 0x20000, 200_000  # one line each, of node 0's memory
    # Both increment one counter (a load and a store, 8 times a line), 2 us of guest time at a turn: every turn
    # but the very first starts with the line the other node wrote, so one transfer a turn; the line callback
    # (images/qemu/0005) skips the repeats but is made to pass on the accesses that move the line: the same counts.
    results = []
    for exe in ("plugin_harness_charge", "plugin_harness_line", "plugin_harness_line"):
        rows, out = _pair(harness, tmp_path, model, exe, counter, counter, 64, 100_000, HARNESS_RMW="3")
        assert rl.read_log(tmp_path / "lat.txt").head["coherence"] == 1
        assert sum(r["transfers"] for r in rows) == out["switches"] > 1000
        for v, r in enumerate(rows):
            assert r["transfers"] > 0 and r["transfer_ns"] == r["transfers"] * per_turn // 1000
            # the rest of the charge: the line's first miss, when its set is one of the sampled ones
            assert r["charged_ns"] - r["transfer_ns"] == _first_miss_ns(model, r) and sum(r["misses"]) <= 1
            assert out[f"vcpu_time_ns_{v}"] == 1_600_000 + r["charged_ns"]  # its accesses, then the transfers
        results.append((rows, out["switches"]))
    # every access or the line callback's, and again: the same
    assert (_but_lookups(results[0][0]), results[0][1]) == (_but_lookups(results[1][0]), results[1][1])
    assert results[1] == results[2]
    # Two private counters, one a line each: nothing moves, nothing is charged, the time is the accesses'.
    for exe in ("plugin_harness_charge", "plugin_harness_line"):
        rows, out = _pair(harness, tmp_path, model, exe, counter, private, 64, 100_000, HARNESS_RMW="3")
        assert [r["transfers"] for r in rows] == [0, 0] and all(sum(r["misses"]) <= 1 for r in rows)
        assert [r["charged_ns"] for r in rows] == [_first_miss_ns(model, r) for r in rows]
        assert [out["vcpu_time_ns_0"], out["vcpu_time_ns_1"]] == [1_600_000 + r["charged_ns"] for r in rows]
    # Coherence off (the model before it): the handed counter costs nothing either.
    off = replace(model, coherence=False)
    assert "coherence=1" not in off.plugin_args(Path("o")) and off.to_dict()["coherence"]["modelled"] is False
    rows, out = _pair(harness, tmp_path, off, "plugin_harness_line", counter, counter, 64, 100_000, HARNESS_RMW="3")
    assert [r["transfers"] for r in rows] == [0, 0] and out["vcpu_time_ns_1"] == 1_600_000 + rows[1]["charged_ns"]
    assert (
        rows[1]["charged_ns"] == _first_miss_ns(off, rows[1])
        and rl.read_log(tmp_path / "lat.txt").head["coherence"] == 0
    )


def test_a_line_written_once_and_then_only_read_moves_once(harness, tmp_path) -> None:
    # vCPU 0 writes 1 MiB once, then both read it 4 times over: node 1 takes each line once (16384 transfers),
    # then holds a copy that stays valid; node 0 owns them and pays nothing.
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", coherence=True)
    for exe in ("plugin_harness_charge", "plugin_harness_line"):
        rows, _ = _pair(harness, tmp_path, model, exe, 0x10000, 0x10000, MIB, 4, HARNESS_INIT="1")
        assert [r["transfers"] for r in rows] == [0, MIB // 64] and rows[1]["transfer_ns"] == MIB // 64 * 200
    # Under the host's clock (held by spinning, as its misses are): the extra over a local miss, (2 - 1) x 100 ns.
    host = replace(model, clock="host")
    assert host.transfer_ps(1, 0) == 100_000 and host.to_dict()["coherence"]["modelled"]
    so, plain = harness
    rows, out = _pair(harness, tmp_path, host, plain.name, 0x10000, 0x10000, 64 * 1024, 2, HARNESS_INIT="1")
    assert [r["transfers"] for r in rows] == [0, 1024] and rows[1]["transfer_ns"] == 1024 * 100
    assert rows[1]["held_ns"] >= 1024 * 100 - 20_000  # paid by 20 us chunks


def test_a_line_out_of_its_owners_caches_moves_from_memory_not_from_the_owner(harness, tmp_path) -> None:
    # Node 0 writes 4 MiB once (65,536 lines), then both nodes read it twice. A node's caches hold coherence_mib:
    # only the lines node 0 wrote last, within that much of what it brought in, are still its to hand over; node 1
    # takes the older ones from memory (the miss model's charge, no transfer). Before the limit, a line stayed its
    # last writer's for ever: every line a transfer, as with no limit (0) here.
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", coherence=True)
    lines = 4 * MIB // 64
    for mib, young in ((0, lines), (8, lines), (2, lines // 2 - 1), (1, lines // 4 - 1)):
        for exe in ("plugin_harness_charge", "plugin_harness_line"):
            rows, _ = _pair(harness, tmp_path, replace(model, coherence_mib=mib), exe, 0x10000, 0x10000, 4 * MIB, 2,
                            HARNESS_INIT="1")  # fmt: skip
            assert rl.read_log(tmp_path / "lat.txt").head["coh_lines"] == mib * MIB // 64
            assert [r["transfers"] for r in rows] == [0, young], (mib, exe)
            assert rows[1]["transfer_ns"] == young * 200
    # A node of two LLCs holds twice one LLC's lines (the topology's LLCs a node: coh_node= for node 0, the owner):
    # with 1 MiB an LLC, node 0 keeps its last 2 MiB, as with 2 MiB a node above; node 1's one LLC does not matter.
    two = replace(model, coherence_mib=1, node_llcs=(2, 1))
    assert two.plugin_args(Path("o"))[-2:] == ["coh_lines=16384", "coh_node=0:32768"]
    assert two.to_dict()["coherence"]["node_cache_mib"] == [2, 1]
    rows, _ = _pair(harness, tmp_path, two, "plugin_harness_line", 0x10000, 0x10000, 4 * MIB, 2, HARNESS_INIT="1")
    assert [r["transfers"] for r in rows] == [0, lines // 2 - 1]
    assert rl.read_log(tmp_path / "lat.txt").head["coh_lines"] == 16384  # (coh_node lines are not head words)
    # With the stream detector on, node 1's sweep takes the lines as a stream's misses: at the pair's bandwidth
    # (10 GB/s / 2: 12.8 ns a line), but for the first of the sweep, which nothing before it leads to (200 ns).
    streams = replace(model, local_gbs=10.0, coherence_mib=0)
    assert streams.stream_cost_ps(1, 0) == 12_800
    rows, _ = _pair(harness, tmp_path, streams, "plugin_harness_line", 0x10000, 0x10000, 4 * MIB, 2, HARNESS_INIT="1")
    assert [r["transfers"] for r in rows] == [0, lines]
    assert rows[1]["transfer_ns"] == (lines - 1) * 12_800 // 1000 + 200
    # Hot lines are no sweep, whatever sits next to them: a counter handed between the nodes, each load followed by
    # one of the next line (which nobody writes), and two counters side by side, pay the latency each time.
    for start, nbytes, twin in ((0x10000, 64, 64), (0x10000, 128, 0)):
        env = {"HARNESS_QUANTUM_NS": "2000", "HARNESS_PEER": f"1:{start:x}", "HARNESS_RMW": "3"}
        exe = harness[1].with_name("plugin_harness_line")
        s, _ = _feed_model(harness, tmp_path, streams, 0, start, nbytes, 20_000, exe, stride=8, twin=twin, env=env)
        rows = s["whole_run"]["per_vcpu"]
        # (side by side, the second counter's first transfer follows the first's and looks like a sweep: once)
        slack = 200 if nbytes == 128 else 0
        assert all(r["transfers"] > 200 and 0 <= r["transfers"] * 200 - r["transfer_ns"] <= slack for r in rows), rows


def test_coherence_is_off_by_default_and_on_when_asked() -> None:
    from lab.run.options import RunOptions
    from lab.topology.model.spec import load_topology

    for clock in ("virtual", "host"):
        assert not model_for(_topo(), "slit", 100.0, clock).coherence  # type: ignore[union-attr]
        assert model_for(_topo(), "slit", 100.0, clock, coherence=True).coherence  # type: ignore[union-attr]
    off = model_for(_topo(), "slit", 100.0, "virtual")
    assert off is not None and not off.to_dict()["coherence"]["modelled"]
    ring = load_topology("ring-2")
    for word, on in (("", False), ("on", True), ("off", False)):
        for clock in ("virtual", "host"):
            opts = RunOptions.of(remote_latency="slit", clock=clock, accel="tcg", coherence=word)
            assert _model_of(opts, ring).coherence is on  # type: ignore[union-attr]
    with pytest.raises(LabError, match=r"^--coherence: only with --remote-latency slit or table$"):
        RunOptions.of(coherence="on")
    with pytest.raises(LabError, match=r"^--coherence: 'yes' is not one of on, off$"):
        RunOptions.of(remote_latency="slit", accel="tcg", coherence="yes")


def test_the_node_caches_size_is_an_option_of_coherence() -> None:
    from lab.run.options import RunOptions
    from lab.topology.model.spec import load_topology

    ring = load_topology("ring-2")
    for mib, lines in ((None, 524288), (1, 16384), (0, 0)):  # (0: no limit, the plugin's coh_lines=0)
        opts = RunOptions.of(remote_latency="slit", clock="virtual", accel="tcg", coherence="on", coherence_mib=mib)
        m = _model_of(opts, ring)
        assert m is not None and m.plugin_args(Path("o"))[-1] == f"coh_lines={lines}"
        assert m.to_dict()["coherence"]["node_cache_mib"] == [32 if mib is None else (mib or None)] * 2
    uneven = load_topology("nps2-uneven-llc")  # node 0: 2 LLCs, node 1: 1
    opts = RunOptions.of(remote_latency="slit", clock="virtual", accel="tcg", coherence="on", coherence_mib=4)
    m = _model_of(opts, uneven)
    assert m is not None and m.to_dict()["coherence"]["node_cache_mib"] == [8, 4]
    # (coherence by LLC: each LLC its 4 MiB, a move between node 0's two LLCs charged; node 1 has one)
    assert m.plugin_args(Path("o"))[-5:] == ["coh_lines=65536", "vllc=0:1:0", "vllc=2:3:1", "vllc=4:5:2",
                                             "llc_cost=0:80000"]  # fmt: skip
    big = RunOptions.of(remote_latency="slit", clock="virtual", accel="tcg", coherence="on", coherence_mib=65536)
    assert _model_of(big, ring) is not None  # (one LLC a node: 64 GiB, the plugin's 2^30 lines)
    # (by LLC the plugin counts each LLC's lines, not a node's total: 64 GiB an LLC on a node of two is its 2^30)
    m = _model_of(big, uneven)
    assert m is not None and "coh_lines=1073741824" in m.plugin_args(Path("o"))
    for bad in (-1, 65537):
        with pytest.raises(LabError, match=r"^--coherence-mib: .* is not a whole number of MiB from 0 \(no limit\)"):
            RunOptions.of(remote_latency="slit", accel="tcg", coherence="on", coherence_mib=bad)
    for coherence, latency in (("off", "slit"), ("", "slit"), ("", "off")):
        with pytest.raises(LabError, match=r"^--coherence-mib: only with --coherence on$"):
            RunOptions.of(remote_latency=latency, accel="tcg", coherence=coherence, coherence_mib=8)


def test_a_shared_node_needs_a_qemu_that_tells_a_vcpus_time(harness, tmp_path) -> None:
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1), chunk_ns=1000, clock="virtual", local_gbs=10.0,
                         share_window_ns=5000)  # fmt: skip
    parts = [r.arg() for r in ap.node_ranges(_topo(), "guest-physical")] + model.plugin_args(tmp_path / "lat.txt")
    charging = harness[1].with_name("plugin_harness_charge")  # qemu_plugin_charge_ns, no qemu_plugin_vcpu_clock_ns
    proc = subprocess.run([str(charging), str(harness[0]), "0", "0", "64", "64", "1", *parts], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode != 0 and "share_ns: this QEMU has no qemu_plugin_vcpu_clock_ns" in proc.stderr
    host = [p for p in parts if p != "lat_clock=virtual"]  # the host's clock: no guest time to share in
    proc = subprocess.run([str(charging), str(harness[0]), "0", "0", "64", "64", "1", *host], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert proc.returncode != 0 and "share_ns needs stream=1 and lat_clock=virtual" in proc.stderr


@pytest.mark.parametrize(
    "bad",
    ["lines=1000", "lat_sample=3", "cost=0:1", "vnode=1:0:0", "chunk_ns=5", "bw=0:1", "stream=yes", "share_ns=5",
     "node_bw=0:0", "node_bw=x", "coherence=2", "coh_lines=", "coh_lines=-1", "coh_lines=2147483648", "coh_node=1",
     "coh_node=24:5", "coh_node=0:2147483648"],
)  # fmt: skip
def test_plugin_refuses_bad_latency_arguments(harness, tmp_path, bad) -> None:
    so, exe = harness
    proc = subprocess.run([str(exe), str(so), "0", "0", "64", "64", "1", "range=0:0:1000",
                           f"lat_out={tmp_path / 'x'}", bad], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and f"numalab access_matrix plugin: bad {bad.split('=')[0]}" in proc.stderr


def test_plugin_refuses_a_cache_size_without_coherence(harness, tmp_path) -> None:
    so, exe = harness
    args = [str(exe), str(so), "0", "0", "64", "64", "1", "range=0:0:1000", f"lat_out={tmp_path / 'x'}", "coh_lines=64"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "coh_lines needs coherence=1" in proc.stderr
    proc = subprocess.run([*args[:-1], "coh_node=0:64"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "coh_node needs coherence=1" in proc.stderr


def _write(tmp_path: Path, other: int) -> Path:
    p = tmp_path / "remote-latency.txt"
    # looked up, hits, misses node 0/1, other, charged, held ns, io, stream misses, shared stream misses
    # ... stream misses, shared stream misses, coherence transfers, their charge (ns; among the 120300 charged)
    row0 = [10, 2, 5, 3, other, 120300, 310, 0, 2, 1, 4, 120000]
    lines = ["numalab-remote-latency 5", "api 1", "lines 4096", "modelled_sets 256", "lat_sample 16",
             "chunk_ns 20000", "stream 1", "share_ns 5000", "coherence 1", "vcpus 2", "nodes 2", "vnode 0 0",
             "vnode 1 1", "cost 0 1 100000", "bw 0 1 12800", "node_bw 0 6400", "snap 100 " + " ".join(["0"] * 24),
             "end 300 " + " ".join(map(str, row0 + [0] * 12))]  # fmt: skip
    p.write_text("\n".join(lines) + "\n")
    return p


def test_measure_writes_the_section_and_fails_a_wrong_map(tmp_path) -> None:
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1))
    src = _write(tmp_path / "in" if (tmp_path / "in").mkdir() is None else tmp_path, 0)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    res = rl.measure(run_dir, src, model, 100, 300)
    assert res.failure is None and set(res.files) == {rl.JSON_FILE, rl.RAW_FILE}
    w = res.section["window"]
    assert w["modelled_misses"] == 8 and w["estimated_misses"] == 128 and w["remote_miss_pct"] == 37.5
    assert w["stream_miss_pct"] == 25.0 and w["per_vcpu"][0]["stream_misses"] == 2
    assert w["shared_miss_pct"] == 12.5 and w["per_vcpu"][0]["shared_misses"] == 1
    assert w["transfers"] == 4 and w["transfer_s"] == 0.00012 and w["per_vcpu"][0]["transfer_ns"] == 120000
    assert res.section["coherence"] and "4 line transfers between nodes" in rl.summary_lines(
        {"remote_latency": res.section})[0]  # fmt: skip
    assert res.section["model"]["local_ns"] == 100.0 and res.section["complete"]
    src = _write(tmp_path / "in", 1)
    bad = rl.measure(tmp_path / "run", src, model, None, None)
    assert bad.failure and "address map is wrong" in bad.failure[1] and "window" not in bad.section
    none = rl.measure(tmp_path / "run", tmp_path / "missing", model, None, None)
    assert none.failure and "remote latency:" in none.failure[1]


def test_a_matrix_setting_asks_for_remote_latency(tmp_path) -> None:
    from lab.matrix.definition import parse_matrix
    from lab.matrix.schedule import run_options

    base = {"topologies": ["ring-2"], "workloads": ["idle"], "baseline": {"setting": "free"}}
    spec = parse_matrix(base | {"settings": [{"name": "free"}, {"name": "costly", "remote_latency": "slit"}]},
                        "inline", "latency")  # fmt: skip
    assert [run_options(r, "stock", tmp_path, None, {}).latency.remote_latency for r in spec.runs] == ["off", "slit"]
    with pytest.raises(LabError, match=r"settings\[0\]\.remote_latency: expected one of off, slit, table, got 'hmat'"):
        parse_matrix(base | {"settings": [{"name": "free", "remote_latency": "hmat"}]}, "inline", "bad")
    # with the virtual clock: whether the QEMU can charge it is the run's to find out, on the host that runs it
    spec = parse_matrix(base | {"settings": [{"name": "free", "remote_latency": "slit", "qemu": "charge",
                                              "clock": "virtual"}]}, "inline", "virtual")  # fmt: skip
    assert run_options(spec.runs[0], "stock", tmp_path, None, {}).guest_time.clock == "virtual"


def test_the_virtual_clock_needs_a_qemu_that_charges_time() -> None:
    from lab.vm.qemu.emulator import Emulator

    stock = Emulator("/usr/bin/qemu-system-x86_64", "QEMU emulator version 10.0.2", ())
    with pytest.raises(LabError, match=r"^--remote-latency with --clock virtual: QEMU 10\.0\.2 \(/usr/bin/qemu-system-"
                       r"x86_64\) cannot charge the guest's clock; build numalab's patched QEMU with make setup-qemu-"
                       r"charge, then add --qemu charge$"):  # fmt: skip
        rl.check_request("tcg", "qemu", "virtual", stock)
    rl.check_request("tcg", "qemu", "virtual", Emulator("/q", "QEMU emulator version 10.0.2", (), charges_time=True))
    rl.check_request("tcg", "qemu", "host", stock)
    m = model_for(_topo(30), "slit", 100.0, "virtual")
    assert m is not None and m.virtual and m.chunk_ns == 1000 and "lat_clock=virtual" in m.plugin_args(Path("o"))
    assert m.to_dict()["clock"] == "virtual" and m.cost_ps(1, 1) == 100_000 and m.cost_ps(1, 0) == 300_000


def test_streams_share_a_node_under_the_virtual_clock_with_a_qemu_that_tells_a_vcpus_time() -> None:
    from lab.vm.qemu.emulator import Emulator
    from lab.vm.tcg.latency_model import share_window_ns

    assert (share_window_ns(0), share_window_ns(2000), share_window_ns(4000)) == (5000, 5000, 8000)
    m = model_for(_topo(), "slit", 100.0, "virtual", 10.0, share_window_ns(4000))
    assert m is not None and m.shared and "share_ns=8000" in m.plugin_args(Path("o"))
    assert m.to_dict()["streams"]["contention"] | {"model": ""} == {"shared": True, "model": "", "window_ns": 8000,
                                                                      "node_gbs": [10.0, 10.0]}  # fmt: skip
    host = model_for(_topo(), "slit", 200.0, "host", 2.0, 5000)  # the host's clock: no guest time to share in
    assert host is not None and not host.shared and host.share_window_ns == 0
    assert host.to_dict()["streams"]["contention"] == {"shared": False, "why": "not modelled under the host's clock"}
    off = model_for(_topo(), "slit", 100.0, "virtual", 0.0, 5000)
    assert off is not None and not off.shared and "share_ns" not in " ".join(off.plugin_args(Path("o")))
    older = Emulator("/q", "QEMU emulator version 10.0.2", (), charges_time=True)  # 0001-0007, not 0008
    with pytest.raises(LabError, match=r"^--remote-latency with --clock virtual: QEMU 10\.0\.2 \(/q\) cannot tell the "
                       r"plugin a vCPU's own guest time, which streams sharing a node's bandwidth need; rebuild "
                       r"numalab's QEMU with make setup-qemu-charge \(images/qemu/0008\), or add "
                       r"--remote-bandwidth-gbs 0 \(no streams\)$"):  # fmt: skip
        rl.check_shared_bandwidth("virtual", 10.0, older)
    rl.check_shared_bandwidth("virtual", 0.0, older)
    rl.check_shared_bandwidth("host", 2.0, older)
    rl.check_shared_bandwidth("virtual", 10.0, replace(older, vcpu_clock=True))


def test_one_plugin_counts_the_access_matrix_and_charges_latency(harness, tmp_path) -> None:
    so, exe = harness
    model = LatencyModel(((1.0, 2.0), (2.0, 1.0)), 100.0, (0, 1))
    ranges = ap.node_ranges(_topo(), "guest-physical")
    args = [f"out={tmp_path / 'am.txt'}", "sample=1", *model.plugin_args(tmp_path / "lat.txt")]
    arg = ap.plugin_argument(so, ranges, args)
    parts = ap.split_argument(arg)[1:]  # (without file=)
    proc = subprocess.run([str(exe), str(so), "0", f"{256 * MIB:x}", str(1 * MIB), "64", "1", *parts],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    from lab.analysis.access_counts import read_log as read_matrix

    matrix = read_matrix(tmp_path / "am.txt")
    assert matrix.ended and matrix.snaps[-1][1][:2] == [0, MIB // 64]  # vCPU 0: every access to node 1
    lat = rl.summarize(rl.read_log(tmp_path / "lat.txt"), None, None)["whole_run"]["per_vcpu"][0]
    assert lat["misses"] == [0, MIB // 64 // 16] and lat["charged_ns"] == MIB // 64 * 100


# --- latency_ratio: and --remote-latency table ------------------------------------------------------


def _spec(**extra) -> dict:
    base = {"name": "t", "nodes": 2, "cpus_per_node": 1, "memory_per_node": "256M"}
    return base | {"distances": [[10, 32], [32, 10]]} | extra


def test_a_latency_table_overrides_the_slit() -> None:
    from lab.topology.model.spec import load_spec, load_topology
    from lab.topology.model.topology import topology_from_dict

    topo = load_spec(_spec(latency_ratio=[[1, 1.7], [1.7, 1]]), "t.yaml")
    table, slit = model_for(topo, "table", 100.0), model_for(topo, "slit", 100.0)
    assert table is not None and slit is not None
    assert table.ratios == ((1.0, 1.7), (1.7, 1.0)) and table.to_dict()["source"] == "latency_ratio"
    assert slit.ratios == ((1.0, 3.2), (3.2, 1.0)) and slit.to_dict()["source"] == "slit"
    assert "cost=0:1:70000" in table.plugin_args(Path("x")) and "cost=0:1:220000" in slit.plugin_args(Path("x"))
    assert topology_from_dict(topo.to_dict()) == topo  # a run record keeps the table
    assert "latency_ratio" not in load_topology("ring-2").to_dict()  # (and a topology without one says nothing)
    preset = load_topology("amd-2s-xgmi")
    assert preset.latency_ratio == ((1.0, 1.7), (1.7, 1.0)) and preset.distances[0][1] == 32


def test_table_without_a_latency_ratio_is_a_one_line_error() -> None:
    from lab.topology.model.spec import load_topology

    with pytest.raises(LabError, match=r"--remote-latency table: topology ring-2 has no latency_ratio: matrix"):
        model_for(load_topology("ring-2"), "table", 100.0)


@pytest.mark.parametrize(
    ("ratio", "needle"),
    [
        ([[1, 1.5]], r"latency_ratio: expected a 2x2 matrix"),
        ([[1, 1.5], [1.5]], r"latency_ratio: expected a 2x2 matrix"),
        ("1.5", r"latency_ratio: expected an n x n matrix .*, got '1.5'"),
        ([[1.1, 1.5], [1.5, 1]], r"latency_ratio\[0\]\[0\]: a node's own memory is the unit: must be 1, got 1.1"),
        ([[1, 0.5], [1.5, 1]], r"latency_ratio\[0\]\[1\]: must be from 1 to 20, got 0.5"),
        ([[1, 1.5], [21, 1]], r"latency_ratio\[1\]\[0\]: must be from 1 to 20, got 21"),
        ([[1, "fast"], [1.5, 1]], r"latency_ratio\[0\]\[1\]: expected a finite number, got 'fast'"),
        ([[1, float("nan")], [1.5, 1]], r"latency_ratio\[0\]\[1\]: expected a finite number, got nan"),
        ([[1, True], [1.5, 1]], r"latency_ratio\[0\]\[1\]: expected a finite number, got True"),
    ],
)
def test_a_bad_latency_table_names_its_field(ratio, needle: str) -> None:
    from lab.topology.model.spec import load_spec

    with pytest.raises(LabError, match=r"^t.yaml: " + needle):
        load_spec(_spec(latency_ratio=ratio), "t.yaml")


# --- stream misses: --remote-bandwidth-gbs and bandwidth_ratio: ---------------------------------------------


def test_stream_bandwidth_defaults_to_the_latency_ratio_and_a_table_overrides_it() -> None:
    from lab.topology.model.spec import load_spec
    from lab.topology.model.topology import topology_from_dict

    plain = model_for(load_spec(_spec(), "t.yaml"), "slit", 100.0, "virtual", 10.0)
    assert plain is not None and plain.bw_ratios == ((1.0, 3.2), (3.2, 1.0))  # the SLIT's latency ratio
    st = plain.to_dict()["streams"]
    assert st["bandwidth_source"] == "slit" and st["bandwidth_gbs"] == [[10.0, 3.125], [3.125, 10.0]]
    assert st["charge_ns"] == [[6.4, 20.48], [20.48, 6.4]] and st["local_gbs"] == 10.0  # 64 B at 10 and 3.125 GB/s
    topo = load_spec(_spec(latency_ratio=[[1, 1.7], [1.7, 1]], bandwidth_ratio=[[1, 2.5], [1.25, 1]]), "t.yaml")
    assert topology_from_dict(topo.to_dict()) == topo  # a run record keeps the table
    for mode in ("slit", "table"):  # the spec's bandwidth table, whichever latency ratios
        m = model_for(topo, mode, 100.0, "virtual", 10.0)
        assert m is not None and m.to_dict()["streams"]["bandwidth_source"] == "bandwidth_ratio"
        assert (m.stream_cost_ps(0, 1), m.stream_cost_ps(1, 0)) == (16000, 8000)
    host = model_for(topo, "table", 200.0, "host", 2.0)  # the host's clock: the extra over a local line (32 ns)
    assert host is not None and (host.stream_cost_ps(0, 0), host.stream_cost_ps(0, 1)) == (0, 48000)
    assert "stream=1" in host.plugin_args(Path("o")) and "bw=0:1:48000" in host.plugin_args(Path("o"))
    off = model_for(topo, "table", 200.0, "host", 0.0)
    assert off is not None and off.to_dict()["streams"] == {"detector": "off", "local_gbs": 0.0}
    assert not [a for a in off.plugin_args(Path("o")) if a.startswith(("stream=", "bw="))]
    with pytest.raises(LabError, match=r"^--remote-bandwidth-gbs: must be 0 \(off\) or more than 0 .*got -1$"):
        model_for(topo, "slit", 100.0, "host", -1.0)


def test_the_run_defaults_and_the_option_without_the_charge() -> None:
    from lab.run.options import RunOptions
    from lab.topology.model.spec import load_topology

    ring = load_topology("ring-2")
    virtual = _model_of(RunOptions.of(remote_latency="slit", clock="virtual", accel="tcg"), ring)
    host = _model_of(RunOptions.of(remote_latency="slit", accel="tcg"), ring)
    assert virtual is not None and host is not None and (virtual.local_gbs, host.local_gbs) == (10.0, 2.0)
    given = _model_of(RunOptions.of(remote_latency="slit", accel="tcg", remote_bandwidth_gbs=0), ring)
    assert given is not None and not given.streams
    with pytest.raises(LabError, match=r"^--remote-bandwidth-gbs: only with --remote-latency slit or table$"):
        RunOptions.of(remote_bandwidth_gbs=5.0)
    with pytest.raises(LabError, match=r"^--remote-bandwidth-gbs: must be 0 \(off\) or more than 0"):
        RunOptions.of(remote_latency="slit", accel="tcg", remote_bandwidth_gbs=float("nan"))


@pytest.mark.parametrize(
    ("ratio", "needle"),
    [
        ([[1, 1.5]], r"bandwidth_ratio: expected a 2x2 matrix"),
        ([[1.1, 1.5], [1.5, 1]], r"bandwidth_ratio\[0\]\[0\]: a node's own memory is the unit: must be 1, got 1.1"),
        ([[1, 0.5], [1.5, 1]], r"bandwidth_ratio\[0\]\[1\]: must be from 1 to 20, got 0.5"),
        ([[1, "fast"], [1.5, 1]], r"bandwidth_ratio\[0\]\[1\]: expected a finite number, got 'fast'"),
    ],
)
def test_a_bad_bandwidth_table_names_its_field(ratio, needle: str) -> None:
    from lab.topology.model.spec import load_spec

    with pytest.raises(LabError, match=r"^t.yaml: " + needle):
        load_spec(_spec(bandwidth_ratio=ratio), "t.yaml")


def test_a_matrix_setting_takes_coherence_and_the_runs_check_it() -> None:
    def matrix(setting: dict) -> object:
        return parse_matrix({"name": "m", "topologies": ["ring-2"], "kernels": ["a"], "workloads": ["idle"],
                             "settings": [{"name": "c", **setting}], "repeats": 1}, "m.yaml", "m")  # fmt: skip

    on = matrix({"clock": "virtual", "qemu": "charge", "remote_latency": "slit", "coherence": "on"})
    assert run_options_of(on.runs[0], "a", None).latency.coherence == "on"
    for given, word in ((True, "on"), (False, "off"), (None, "")):
        setting = {"remote_latency": "slit"} | ({} if given is None else {"coherence": given})
        assert run_options_of(matrix(setting).runs[0], "a", None).latency.coherence == word
    with pytest.raises(LabError, match=r"--coherence: only with --remote-latency slit or table"):
        matrix({"coherence": "on"})
    with pytest.raises(LabError, match=r"settings\[0\]\.coherence"):
        matrix({"remote_latency": "slit", "coherence": "maybe"})

"""RunOptions, the library's entry point: the CLI, the matrix and the tests build the same value, and a
matrix child reads it back from JSON exactly (no command-line flags in between)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.cli.main import build_parser, run_options_from_args
from lab.errors import LabError
from lab.guest.trace_options import TraceOptions
from lab.matrix.definition import parse_matrix
from lab.matrix.schedule import child_command, host_options, run_options
from lab.run.options import CHOICES, RunOptions
from lab.topology.model.ref import TopologyRef
from lab.vm.libvirt.libvirt_hostspec import HostSpec
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.latency_options import LatencyOptions


def _cli(*argv: str) -> RunOptions:
    return run_options_from_args(build_parser().parse_args(["run", *argv]))


def test_cli_defaults_are_the_library_defaults() -> None:
    """`numalab run` with no flags asks for exactly RunOptions() (a default changed on one side only fails)."""
    assert _cli() == RunOptions()


def test_every_run_flag_reaches_its_option() -> None:
    """Each option set away from its default through the command line (a flag that no longer reaches its
    field fails here: the list of fields must all be covered)."""
    opts = _cli(
        "--topology", "mesh-4", "--cpus-per-node", "3", "--mem-per-node", "1G", "--threads", "1",
        "--kernel", "a", "--kernel", "b", "--scheduler", "scx_simple", "--workload", "pairs", "--duration", "7",
        "--repeat", "3", "--out", "/tmp/x", "--runs-dir", "/tmp/r", "--numa-balancing", "tiering", "--knob",
        "scan_delay_ms=5",
        "--kernel-default-knobs", "--event", "sched:sched_migrate_task", "--trace-buffer-kb", "64", "--node-maps",
        "--trace-mode", "record", "--append", "quiet", "--backing", "memfd", "--prealloc", "--pinning", "node",
        "--firmware", "seabios", "--accel", "tcg", "--clock", "virtual", "--seed", "3", "--quantum", "2000",
        "--insns-per-ns", "4", "--timeout", "99", "--boot-deadline", "20",
        "--guest-output-limit", "2G", "--qemu", "/q",
        "--test-fault", "panic", "--backend", "libvirt", "--connect", "qemu:///session", "--pool-dir", "/p",
        "--no-upload", "--access-matrix", "--access-sample", "8", "--access-address-map", "guest-physical",
    )  # fmt: skip
    given, default = opts.flat(), RunOptions().flat()  # (by the flat names: RunOptions' own and its pieces' fields)
    unchanged = [name for name in RunOptions.option_names() if given[name] == default[name]]
    # (--no-trace conflicts with --event and --trace-mode, --lean with --node-maps, --workload-cmd with
    # --workload, --remote-latency with libvirt and --clock virtual: given alone)
    assert unchanged == ["workload_cmd", "workload_files", "remote_latency", "remote_latency_ns",
                         "remote_bandwidth_gbs", "coherence", "coherence_mib", "cache_ways", "no_trace",
                         "lean"]  # fmt: skip
    one_off = _cli("--workload-cmd", "true", "--workload-file", __file__, "--workload-file", str(REPO / "README.md"))
    assert (one_off.workload_cmd, one_off.workload_files) == ("true", (__file__, str(REPO / "README.md")))
    assert _cli("--no-trace").tracing.no_trace is True
    assert _cli("--lean").tracing.lean is True  # (--lean conflicts with --node-maps)
    lat = _cli("--remote-latency", "slit", "--remote-latency-ns", "120", "--remote-bandwidth-gbs", "5", "--coherence",
               "off")  # fmt: skip
    assert lat.latency == LatencyOptions("slit", 120.0, 5.0, "off")
    assert _cli("--remote-latency", "slit", "--coherence", "on", "--coherence-mib", "0").latency.coherence_mib == 0
    assert _cli("--remote-latency", "slit", "--cache-ways", "2").latency.cache_ways == 2
    assert opts.topology == TopologyRef("mesh-4", 3, "1G", 1)
    assert opts.kernels == ("a", "b") and opts.knobs == ("scan_delay_ms=5",) and opts.out == Path("/tmp/x")


def test_json_round_trip_is_exact() -> None:
    opts = _cli("--topology", "ring-2", "--mem-per-node", "256M", "--kernel", "stock", "--knob", "scan_delay_ms=5",
                "--out", "/tmp/o", "--timeout", "30")  # fmt: skip
    assert RunOptions.from_dict(json.loads(opts.to_json())) == opts


# A saved options file as numalab wrote it before the options had pieces (a matrix child's, flat): every field of
# the clock, the memory charge and the tracing set away from its default.
EARLIER_RELEASE = {
    "access_address_map": "", "access_matrix": False, "access_sample": None, "accel": "tcg", "append": [],
    "backend": "qemu", "backing": "ram", "boot_deadline": None, "clock": "virtual", "coherence": "on",
    "coherence_mib": 8, "connect": None, "duration": 20.0, "events": ["sched:sched_waking"], "firmware": "auto",
    "guest_output_limit": None, "insns_per_ns": 4, "kernel_default_knobs": False, "kernels": ["a", "b"], "knobs": [],
    "lean": False, "no_trace": False, "no_upload": False, "node_maps": False, "numa_balancing": "on",
    "out": "/tmp/x", "pinning": "auto", "pool_dir": None, "prealloc": False, "qemu": "x", "quantum": 2000,
    "remote_bandwidth_gbs": 5.0, "remote_latency": "slit", "remote_latency_ns": 120.0, "repeat": 1,
    "runs_dir": "runs", "schedulers": ["fair"], "seed": 4, "test_fault": "", "timeout": None,
    "topology": {"cpus_per_node": 1, "mem_per_node": None, "name": "ring-2", "threads": None},
    "trace_buffer_kb": 64, "trace_mode": "record", "workload": "numa01", "workload_cmd": "", "workload_files": [],
}  # fmt: skip


def test_an_earlier_releases_flat_file_reads_into_the_pieces_and_writes_back_the_same(tmp_path: Path) -> None:
    """Options files and sidecars already on disk are flat: they read into the pieces (each field to its piece,
    none lost) and write back the same (byte for byte while no option is added; a later option adds its key at
    its default, and the earlier keys keep their values)."""
    (tmp_path / "o.json").write_text(json.dumps(EARLIER_RELEASE, indent=1, sort_keys=True) + "\n")
    opts = RunOptions.load(tmp_path / "o.json")
    assert opts.guest_time == ClockOptions("virtual", 4, 2000, 4)
    assert opts.latency == LatencyOptions("slit", 120.0, 5.0, "on", 8)
    assert opts.tracing == TraceOptions(events=("sched:sched_waking",), trace_buffer_kb=64, trace_mode="record")
    written = json.loads(opts.to_json())
    assert {k: written[k] for k in EARLIER_RELEASE} == EARLIER_RELEASE
    assert {k: v for k, v in written.items() if k not in EARLIER_RELEASE} == {
        k: v for k, v in RunOptions().to_dict().items() if k not in EARLIER_RELEASE
    }
    if set(RunOptions.option_names()) == set(EARLIER_RELEASE):  # (the pieces' names are not options)
        assert opts.to_json() == (tmp_path / "o.json").read_text()
    assert opts == RunOptions.of(**opts.flat()) and opts.replaced(seed=5).guest_time.seed == 5
    with pytest.raises(LabError, match="^o.json: tracing: not a run option"):
        RunOptions.from_dict(EARLIER_RELEASE | {"tracing": {}}, "o.json")


@pytest.mark.parametrize(
    "data, needle",
    [
        ({"worklaod": "idle"}, "worklaod: not a run option"),
        ({"duration": "20"}, "duration: expected a number"),
        ({"repeat": True}, "repeat: expected int"),
        ({"kernels": "stock"}, "kernels: expected a list"),
        ({"topology": "ring-4"}, "topology: expected {name"),
        ({"topology": {"name": "ring-4", "cpus": 2}}, "topology: expected {name"),
        ([1, 2], "expected an object of run options"),
    ],
)
def test_bad_json_is_a_one_line_error(data, needle: str) -> None:
    with pytest.raises(LabError, match="^opts.json: ") as err:
        RunOptions.from_dict(data, "opts.json")
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_a_word_option_out_of_its_choices_is_refused_before_anything_runs() -> None:
    for name in CHOICES:
        with pytest.raises(LabError, match=rf"^--{name.replace('_', '-')}: 'nonsense' is not one of "):
            RunOptions().replaced(**{name: "nonsense"})  # (the value checks itself)


def test_matrix_children_get_typed_options_not_flags(tmp_path: Path) -> None:
    """The matrix builds RunOptions from its axes and the child reads that file: what the spec says is what
    the child runs, setting by setting."""
    spec = parse_matrix(
        {"name": "m", "topologies": [{"name": "ring-4", "cpus_per_node": 1}], "workloads": [{"name": "idle",
         "duration": 2}], "settings": [{"name": "slow", "numa_balancing": "off", "knobs": {"scan_delay_ms": 500}}],
         "repeats": 1},
        "m.yaml", "m",
    )  # fmt: skip
    (run,) = spec.runs
    host = HostSpec("qemu:///session", 1, "/pool", False)
    opts = run_options(run, "stock", tmp_path, 60.0, host_options(host))
    cmd = child_command(opts, tmp_path / "logs" / f"{run.id}.options.json")
    assert cmd[-2:] == ["run-options", str(tmp_path / "logs" / f"{run.id}.options.json")]
    back = RunOptions.load(Path(cmd[-1]))
    assert back == opts
    assert back.topology == TopologyRef("ring-4", 1) and back.workload == "idle" and back.duration == 2.0
    assert back.numa_balancing == "off" and back.knobs == ("scan_delay_ms=500",)
    assert (back.vm.backend, back.vm.connect, back.vm.pool_dir, back.vm.no_upload) == ("libvirt", "qemu:///session",
                                                                                         "/pool", True)  # fmt: skip
    assert back.out == tmp_path / "runs" / run.id and back.timeout == 60.0


def test_run_options_command_gives_one_line_errors(tmp_path: Path) -> None:
    bad = tmp_path / "o.json"
    bad.write_text(json.dumps({"workload": "no-such-workload"}))
    assert_one_line_error(numalab("run-options", str(bad)), "unknown workload")
    bad.write_text("{")
    assert_one_line_error(numalab("run-options", str(bad)), f"{bad}: not valid JSON")


def test_run_options_is_not_listed_in_help() -> None:
    """An internal entry point for the matrix's children, not a command users are offered."""
    proc = numalab("--help")
    assert proc.returncode == 0 and "run-options" not in proc.stdout


def test_a_signal_during_a_guarded_read_stops_the_run() -> None:
    """The net under the guest-file readers (any Exception is a problem, the run goes on) lets SIGTERM's
    Interrupted through: a bisect's SIGTERM once let a run finish 'ok' and the next one start."""
    import pytest

    from lab.run.collect import _guarded
    from lab.run.execute import Interrupted

    def interrupted() -> None:
        raise Interrupted("SIGTERM")

    def broken() -> None:
        raise ValueError("bad file")

    problems: list[str] = []
    assert _guarded(problems, "x", broken, "default") == "default" and problems
    with pytest.raises(Interrupted):
        _guarded([], "x", interrupted, None)


@pytest.mark.parametrize(
    "knob,needle",
    [
        ("foo=1", "--knob foo: unknown NUMA-balancing knob"),
        ("scan_delay_ms=fast", "value must be a whole number"),
        ("llc_balancing/../x=1", "expected DIR/NAME under /sys/kernel/debug/sched"),
        ("/etc/passwd=1", "expected DIR/NAME"),
        ("a/b/c/d/e=1", "expected DIR/NAME"),
        ("llc_balancing/enabled=$(reboot)", "the value must be 1-64 letters"),
        ("llc_balancing/enabled=", "the value must be 1-64 letters"),
    ],
)
def test_bad_knobs_are_one_line(knob: str, needle: str) -> None:
    proc = numalab("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--knob", knob)
    assert_one_line_error(proc, needle)


def test_debugfs_knobs_reach_the_guest_settings() -> None:
    from lab.guest.settings import GuestSettings

    settings = GuestSettings("true", 1, knobs={"llc_balancing/enabled": "1", "scan_delay_ms": "50"}, trace_events=())
    assert "KNOBS='llc_balancing/enabled=1 scan_delay_ms=50'" in settings.to_shell()


def test_lean_traces_balancings_own_events_and_takes_no_node_samples() -> None:
    from lab.run.batch import settings_of, trace_events_of
    from lab.workloads.registry import get_workload

    default, lean = RunOptions(), _cli("--lean", "--event", "sched:sched_waking")
    assert "sched:sched_migrate_task" in trace_events_of(default)
    assert trace_events_of(lean) == ("sched:sched_move_numa", "sched:sched_swap_numa", "sched:sched_stick_numa",
                                     "migrate:mm_migrate_pages", "sched:sched_waking")  # fmt: skip
    topo = lean.topology.load()
    settings, lean_settings = (settings_of(o, get_workload("numa01"), topo) for o in (default, lean))
    assert "NODE_SAMPLES" not in settings.to_shell() and "node_samples" not in settings.to_dict()
    assert "export NODE_SAMPLES=0" in lean_settings.to_shell() and lean_settings.to_dict()["node_samples"] is False
    with pytest.raises(LabError, match="^--node-maps: not with --lean"):
        _cli("--lean", "--node-maps")

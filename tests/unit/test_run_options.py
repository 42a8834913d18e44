"""RunOptions, the library's entry point: the CLI, the matrix and the tests build the same value, and a
matrix child reads it back from JSON exactly (no command-line flags in between)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.cli.main import build_parser, run_options_from_args
from lab.errors import LabError
from lab.matrix.definition import parse_matrix
from lab.matrix.schedule import child_command, host_options, run_options
from lab.run.options import CHOICES, RunOptions
from lab.topology.ref import TopologyRef
from lab.vm.libvirt.libvirt_hostspec import HostSpec


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
    default = RunOptions()
    unchanged = [f.name for f in dataclasses.fields(RunOptions) if getattr(opts, f.name) == getattr(default, f.name)]
    # (--no-trace conflicts with --event and --trace-mode, --lean with --node-maps, --workload-cmd with
    # --workload, --remote-latency with libvirt and --clock virtual: given alone)
    assert unchanged == ["workload_cmd", "workload_files", "no_trace", "lean", "remote_latency", "remote_latency_ns",
                         "remote_bandwidth_gbs", "coherence", "coherence_mib"]  # fmt: skip
    one_off = _cli("--workload-cmd", "true", "--workload-file", __file__, "--workload-file", str(REPO / "README.md"))
    assert (one_off.workload_cmd, one_off.workload_files) == ("true", (__file__, str(REPO / "README.md")))
    assert _cli("--no-trace").no_trace is True
    assert _cli("--lean").lean is True  # (--lean conflicts with --node-maps)
    lat = _cli("--remote-latency", "slit", "--remote-latency-ns", "120", "--remote-bandwidth-gbs", "5", "--coherence",
               "off")  # fmt: skip
    assert (lat.remote_latency, lat.remote_latency_ns, lat.remote_bandwidth_gbs) == ("slit", 120.0, 5.0)
    assert lat.coherence == "off"
    assert _cli("--remote-latency", "slit", "--coherence", "on", "--coherence-mib", "0").coherence_mib == 0
    assert opts.topology == TopologyRef("mesh-4", 3, "1G", 1)
    assert opts.kernels == ("a", "b") and opts.knobs == ("scan_delay_ms=5",) and opts.out == Path("/tmp/x")


def test_json_round_trip_is_exact() -> None:
    opts = _cli("--topology", "ring-2", "--mem-per-node", "256M", "--kernel", "stock", "--knob", "scan_delay_ms=5",
                "--out", "/tmp/o", "--timeout", "30")  # fmt: skip
    assert RunOptions.from_dict(json.loads(opts.to_json())) == opts


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
            dataclasses.replace(RunOptions(), **{name: "nonsense"})  # (the value checks itself)


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
    assert (back.backend, back.connect, back.pool_dir, back.no_upload) == ("libvirt", "qemu:///session", "/pool", True)
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


def test_debugfs_knobs_reach_the_plan() -> None:
    from lab.guest.init_plan import GuestPlan

    plan = GuestPlan("true", 1, knobs={"llc_balancing/enabled": "1", "scan_delay_ms": "50"}, trace_events=())
    assert "KNOBS='llc_balancing/enabled=1 scan_delay_ms=50'" in plan.to_shell()


def test_lean_traces_balancings_own_events_and_takes_no_node_samples() -> None:
    from lab.run.batch import plan_of, trace_events_of
    from lab.workloads.registry import get_workload

    default, lean = RunOptions(), _cli("--lean", "--event", "sched:sched_waking")
    assert "sched:sched_migrate_task" in trace_events_of(default)
    assert trace_events_of(lean) == ("sched:sched_move_numa", "sched:sched_swap_numa", "sched:sched_stick_numa",
                                     "migrate:mm_migrate_pages", "sched:sched_waking")  # fmt: skip
    topo = lean.topology.load()
    plan, lean_plan = (plan_of(o, get_workload("numa01"), topo) for o in (default, lean))
    assert "NODE_SAMPLES" not in plan.to_shell() and "node_samples" not in plan.to_dict()
    assert "export NODE_SAMPLES=0" in lean_plan.to_shell() and lean_plan.to_dict()["node_samples"] is False
    with pytest.raises(LabError, match="^--node-maps: not with --lean"):
        _cli("--lean", "--node-maps")

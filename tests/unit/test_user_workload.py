"""Issue #23, a user's own workload, without a VM: the workload file's reader (each mistake a one-line error
naming the file and the field, before any boot), the guest image layer it makes, how its output is read
(untrusted, like every guest's), and its declared metrics in the manifest, compare and the matrix."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.analysis.compare import compare_runs
from lab.analysis.metrics import declared_metrics, get_metric, metric_values, metrics_of
from lab.analysis.record import RunRecord
from lab.errors import LabError
from lab.guest import cpio
from lab.matrix.definition import load_matrix
from lab.record_files import RUN_FORMAT
from lab.topology.model.ref import TopologyRef
from lab.topology.model.spec import load_topology
from lab.workloads import image_layers
from lab.workloads.elf import elf_interpreter, ldd_closure
from lab.workloads.user_workload import command_workload, load_workload_file
from lab.workloads.workload_output import parse_output, parse_user
from lab.workloads.workload_type import UserMetric, UserSpec

GOOD = """\
command: ./prog {cpus} {nodes} {mem_mib} {duration} ${HOME}
files: [prog]
results:
  json-line: "PROG "
metrics:
  - {name: ops_per_s, unit: 1/s, higher_is_better: true, mean: hmean}
  - {name: latency_us, unit: us, higher_is_better: false}
"""
METRICS = "metrics: [{name: a, higher_is_better: true}]\n"
JSON = 'results: {json-line: "X "}\n'


def _static_program(tmp_path: Path, name: str = "prog", *flags: str) -> Path:
    if shutil.which("gcc") is None:
        pytest.fail("gcc is part of make setup")
    src = tmp_path / "p.c"
    src.write_text('#include <stdio.h>\nint main(void) { puts("PROG {}"); return 0; }\n')
    out = tmp_path / name
    subprocess.run(["gcc", *flags, "-o", str(out), str(src)], check=True, timeout=120)
    return out


def _file(tmp_path: Path, text: str, name: str = "w.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_file_fills_in_its_placeholders(tmp_path: Path) -> None:
    _static_program(tmp_path, "prog", "-static")
    w = load_workload_file(_file(tmp_path, GOOD))
    assert w.name == "w" and w.kind == "user" and w.user is not None
    topo = load_topology("ring-2")
    cmd = w.command(topo, 7)
    assert cmd.endswith(f"./prog {topo.total_cpus} {len(topo.nodes)} {int(topo.total_memory_mib * 0.35)} 7 ${{HOME}}")
    assert cmd.startswith("cd /workload && ")
    assert w.user.files == ((str(tmp_path / "prog"), "prog"),)
    assert [m.to_dict()["better"] for m in w.user.metrics] == ["higher", "lower"]


@pytest.mark.parametrize(
    "text, needle",
    [
        ("- a list\n", "expected a mapping"),
        ("command: x\nbogus: 1\n" + JSON + METRICS, "bogus: unknown field"),
        (JSON + METRICS, "command: missing"),
        ("command: x\nfiles: [nothere]\n" + JSON + METRICS, "files[0] nothere: no such file"),
        ("command: x\nfiles: nothere\n" + JSON + METRICS, "files: expected a list"),
        ("command: x\ntools: [no-such-tool-xyz]\n" + JSON + METRICS, "tools[0] no-such-tool-xyz: not found"),
        ("command: x\npackages: [no-such-package-xyz]\n" + JSON + METRICS,
         "packages[0] no-such-package-xyz: not installed"),
        ("command: x\npackages: [Bad_Name]\n" + JSON + METRICS, "packages[0]: 'Bad_Name' is not a Debian package"),
        ("command: x\n" + METRICS, "results: missing"),
        ("command: x\nresults: {json-line: ''}\n" + METRICS, "results.json-line"),
        ("command: x\nresults: {regex: {a: '[0-9]+'}}\n" + METRICS, "results.regex.a: needs exactly one group"),
        ("command: x\nresults: {regex: {a: '(['}}\n" + METRICS, "results.regex.a: not a regular expression"),
        ("command: x\nresults: {regex: {b: '(x)'}}\n" + METRICS, "results.regex.b: not a metric declared"),
        ("command: x\n" + JSON, "metrics: missing"),
        ("command: x\n" + JSON + "metrics: [{name: a}]\n", "metrics[0].higher_is_better: missing"),
        ("command: x\n" + JSON + "metrics: [{name: a, higher_is_better: 1}]\n", "metrics[0].higher_is_better"),
        ("command: x\n" + JSON + "metrics: [{name: a b, higher_is_better: true}]\n", "metrics[0].name"),
        ("command: x\n" + JSON + "metrics: [{name: a, higher_is_better: true, mean: gmean}]\n", "metrics[0].mean"),
        ("command: x\n" + JSON + "metrics: [{name: a, higher_is_better: true, unts: s}]\n", "metrics[0].unts"),
        ("command: x\n" + JSON + "metrics: [{name: a, higher_is_better: true}, {name: a, higher_is_better: true}]\n",
         "metrics[1].name: a is declared twice"),
        ("command: x\nname: 'a/b'\n" + JSON + METRICS, "name: expected"),
        ("command: x\ncommand: y\n" + JSON + METRICS, "duplicate key 'command'"),
        ("command: x\n" + JSON + "metrics: [{name: a, higher_is_better: true, unit: .nan}]\n", "not a finite number"),
    ],
)  # fmt: skip
def test_each_mistake_is_one_line_naming_the_file_and_field(tmp_path: Path, text: str, needle: str) -> None:
    path = _file(tmp_path, text)
    with pytest.raises(LabError) as err:
        load_workload_file(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"workload file {path}"), msg
    assert needle in msg, msg


def test_dynamic_program_without_its_loader_or_library(tmp_path: Path) -> None:
    _static_program(tmp_path, "noloader", "-Wl,--dynamic-linker=/nonexistent/ld.so")
    path = _file(tmp_path, "command: ./noloader\nfiles: [noloader]\n" + JSON + METRICS)
    with pytest.raises(LabError, match=r"files\[0\] noloader: dynamically linked, and its loader /nonexistent/ld.so"):
        load_workload_file(path)
    # Linked against a library that is not there any more: ldd says "not found".
    (tmp_path / "l.c").write_text("int f(void) { return 1; }\n")
    lib = tmp_path / "libgone.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(tmp_path / "l.c")], check=True, timeout=60)
    (tmp_path / "m.c").write_text("int f(void);\nint main(void) { return f(); }\n")
    subprocess.run(["gcc", "-o", str(tmp_path / "needslib"), str(tmp_path / "m.c"), str(lib)], check=True, timeout=60)
    lib.unlink()
    path = _file(tmp_path, "command: ./needslib\nfiles: [needslib]\n" + JSON + METRICS)
    with pytest.raises(LabError, match=r"files\[0\] needslib: dynamically linked: .*libgone.so.*not found"):
        load_workload_file(path)


def test_elf_interpreter(tmp_path: Path) -> None:
    assert elf_interpreter(_static_program(tmp_path, "s", "-static").read_bytes()) is None
    assert elf_interpreter(_static_program(tmp_path, "d").read_bytes()).startswith("/lib")  # type: ignore[union-attr]
    assert elf_interpreter(b"#!/bin/sh\n") is None
    assert elf_interpreter(b"\x7fELF" + b"\xff" * 60) is None  # (nonsense offsets: no crash)


def test_a_script_needs_an_interpreter_the_guest_has(tmp_path: Path) -> None:
    _file(tmp_path, "#!/usr/bin/python3\nprint(1)\n", "s.py")
    path = _file(tmp_path, "command: ./s.py\nfiles: [s.py]\n" + JSON + METRICS)
    with pytest.raises(LabError, match=r"files\[0\] s.py: its interpreter /usr/bin/python3 is not in the guest"):
        load_workload_file(path)
    _file(tmp_path, "#!/bin/sh\necho 'X {\"a\": 1}'\n", "s.sh")
    assert load_workload_file(_file(tmp_path, "command: ./s.sh\nfiles: [s.sh]\n" + JSON + METRICS)).user


def test_the_cli_refuses_before_any_boot(tmp_path: Path) -> None:
    path = _file(tmp_path, "command: x\nfiles: [gone]\n" + JSON + METRICS)
    proc = numalab("run", "--workload", str(path), "--topology", "ring-2", "--out", str(tmp_path / "r"), timeout=60)
    assert_one_line_error(proc, f"workload file {path}: files[0] gone: no such file")
    assert not (tmp_path / "r").exists()
    proc = numalab("run", "--workload", "numa01", "--workload-cmd", "true", timeout=60)
    assert_one_line_error(proc, "--workload-cmd: not with --workload")
    proc = numalab("run", "--workload-cmd", "true", "--workload-file", str(tmp_path / "gone"), timeout=60)
    assert_one_line_error(proc, "--workload-file", "gone: no such file")
    builtin = _file(tmp_path, "command: x\n" + JSON + "metrics: [{name: gbps, higher_is_better: false}]\n", "b.yaml")
    proc = numalab("run", "--workload", str(builtin), timeout=60)
    assert_one_line_error(proc, "metrics[0].name: gbps is a built-in metric")


def test_the_layer_carries_files_tools_and_libraries(tmp_path: Path) -> None:
    _static_program(tmp_path, "prog", "-static")
    _static_program(tmp_path, "dyn")
    tool = shutil.which("nproc")
    assert tool
    text = "command: ./prog\nfiles: [prog, dyn]\ntools: [nproc]\n" + JSON + METRICS
    w = load_workload_file(_file(tmp_path, text))
    assert w.user is not None and w.user.tools == (tool,)
    layer = image_layers.user_layer(w.user)
    assert layer is not None and image_layers.user_layer(w.user) == layer  # cached by content
    names = _cpio_names(layer.read_bytes())
    assert {"workload/prog", "workload/dyn", tool.lstrip("/")} <= names
    libc = [ln for ln in ldd_closure(tool) if "libc.so" in ln]
    assert libc and libc[0].lstrip("/") in names
    assert image_layers.user_layer(None) is None


def _cpio_names(data: bytes) -> set[str]:
    names, at = set(), 0
    while True:
        size, namesize = int(data[at + 54 : at + 62], 16), int(data[at + 94 : at + 102], 16)
        name = data[at + 110 : at + 110 + namesize - 1].decode()
        if name == "TRAILER!!!":
            return names
        names.add(name)
        at = (at + 110 + namesize + 3) // 4 * 4
        at = (at + size + 3) // 4 * 4


def test_cpio_reader_of_this_test() -> None:
    import io

    buf = io.BytesIO()
    cpio.write_cpio(buf, [cpio.directory("a"), cpio.file_entry("a/b", b"xyz")])
    assert _cpio_names(buf.getvalue()) == {"a", "a/b"}


def _spec(**kw) -> UserSpec:
    base: dict = dict(
        source="w.yaml",
        sha256="0" * 64,
        template="x",
        files=(),
        tools=(),
        packages=(),
        json_prefix="R ",
        metrics=(UserMetric("ops", "1/s", True, "hmean"), UserMetric("lat", "us", False)),
    )
    return UserSpec(**(base | kw))


def _workload(spec: UserSpec):
    from lab.workloads.workload_type import Workload

    return Workload("w", "", lambda t, d: "x", "user", programs=(), metrics=(), user=spec)


def test_output_is_read_as_untrusted() -> None:
    w = _workload(_spec())
    assert parse_output(w, 'noise\nR {"ops": 1.5, "lat": 3}\nR {"ops": 2, "lat": 4, "x": "y"}\n') == {
        "ops": 2,
        "lat": 4,
        "x": "y",
    }
    assert parse_output(w, "nothing") == {"parse_error": "no line starting with 'R ' in the workload output"}
    assert parse_output(w, 'R {"ops": 1}')["parse_error"] == "the result has no lat"
    assert "not a finite number" in parse_output(w, 'R {"ops": "1", "lat": 1}')["parse_error"]
    assert parse_output(w, 'R {"ops": NaN, "lat": 1}')["parse_error"]
    assert parse_output(w, 'R {"ops": 1e999, "lat": 1}')["parse_error"]
    assert parse_output(w, 'R {"ops": ' + "9" * 5000 + ', "lat": 1}')["parse_error"]
    assert parse_output(w, "R " + "[" * 100000)["parse_error"]
    assert parse_output(w, "R [1, 2]")["parse_error"] == "the R line is a JSON list, not an object"
    rx = _workload(_spec(json_prefix="", regex=(("ops", r"ops: (\S+)"), ("lat", r"^lat (\S+)$"))))
    assert parse_output(rx, "ops: 1\nops: 2.5\nlat 7\n") == {"ops": 2.5, "lat": 7.0}  # the last match
    assert parse_output(rx, "ops: nan\nlat 1\n") == {"parse_error": "ops: 'nan' is not a finite number"}
    assert parse_output(rx, "ops: " + "1" * 500 + "\nlat 1\n")["parse_error"].startswith("ops:")
    assert parse_output(rx, "ops: 1\n")["parse_error"].startswith("lat: no match")


def test_workload_cmd_takes_every_number() -> None:
    w = command_workload("./x {duration}", ())
    assert w.user is not None and w.user.all_numeric and w.user.json_prefix == "NUMALAB_RESULT "
    result = parse_output(w, 'NUMALAB_RESULT {"a": 1, "b": "text", "c": 2.5, "d e": 3, "f": true}')
    assert w.user.declarations(result) == [
        {"name": "a", "unit": "", "better": "higher", "mean": "amean"},
        {"name": "c", "unit": "", "better": "higher", "mean": "amean"},
    ]
    assert parse_output(w, 'NUMALAB_RESULT {"b": "x"}') == {"parse_error": "the result has no number to compare"}
    with pytest.raises(LabError, match="--workload-cmd: expected one non-empty line"):
        command_workload("a\nb", ())


def _manifest(ops: float, lat: float, decls: list | None = None) -> dict:
    decls = (
        decls
        if decls is not None
        else [
            {"name": "ops", "unit": "1/s", "better": "higher", "mean": "hmean"},
            {"name": "lat", "unit": "us", "better": "lower", "mean": "amean"},
        ]
    )
    return {"status": "ok", "workload": {"name": "w", "result": {"ops": ops, "lat": lat}, "metrics": decls}}


def test_declared_metrics_come_from_the_record() -> None:
    m = _manifest(10, 5)
    assert {x.key: (x.better, x.mean, x.unit) for x in declared_metrics(m)} == {
        "workload.ops": ("higher", "hmean", "1/s"),
        "workload.lat": ("lower", "amean", "us"),
        "workload.ops_per_vcpu_s": ("higher", "hmean", "1/vCPU-s"),  # a rate's twin (a unit per second)
    }
    values = metric_values(m)
    assert values["workload.ops"] == 10 and values["workload.lat"] == 5
    assert get_metric("workload.ops", [m]).better == "higher"
    with pytest.raises(LabError, match="unknown"):
        get_metric("workload.ops")  # not a built-in
    # A record is a user's file: ill-formed declarations, or one that takes a built-in's name, are left out.
    odd = _manifest(
        1,
        1,
        [
            {"name": "gbps", "better": "lower"},
            {"name": "a b", "better": "higher"},
            "x",
            {"name": "ops", "better": "sideways"},
            {"name": "lat", "better": "lower", "mean": "x"},
        ],
    )
    assert declared_metrics(odd) == ()
    assert get_metric("workload.gbps", [odd]).better == "higher"  # the built-in stays as it is
    assert [x.key for x in metrics_of([m, m])].count("workload.ops") == 1


def test_compare_shows_declared_metrics_with_their_direction(tmp_path: Path) -> None:
    topo = load_topology("ring-2").to_dict()

    def record(name: str, ops: float, lat: float) -> RunRecord:
        # (built in memory: compare reads the manifest's status, setup and figures)
        m = _manifest(ops, lat) | {
            "format": RUN_FORMAT,
            "run_id": name,
            "topology": topo,
            "kernel": {"name": "k"},
            "accelerator": {"name": "tcg"},
            "metrics": {},
            "settings": {"numa_balancing": "1"},
        }
        return RunRecord(tmp_path / name, m)

    base = [record("a1", 10, 5), record("a2", 11, 5.5)]
    new = [record("b1", 20, 2), record("b2", 21, 2.5)]
    rows = {r.metric.key: r for r in compare_runs(base, new).rows}
    assert rows["workload.ops"].metric.better == "higher" and rows["workload.ops"].mean_name == "Hmean"
    assert rows["workload.lat"].metric.better == "lower"
    assert rows["workload.ops"].diff_text().startswith("+") and rows["workload.lat"].diff_text().startswith("+")


def test_matrix_with_a_builtin_and_a_file_workload(tmp_path: Path) -> None:
    _static_program(tmp_path, "prog", "-static")
    (tmp_path / "wl").mkdir()
    _file(tmp_path / "wl", GOOD.replace("files: [prog]", "files: [../prog]"), "repro.yaml")
    matrix = _file(
        tmp_path,
        "topologies: [ring-2]\nworkloads: [idle, wl/repro.yaml, {name: wl/repro.yaml, duration: 5}]\n",
        "m.yaml",
    )
    with pytest.raises(LabError, match="workloads: entries must be distinct"):
        load_matrix(str(matrix))
    matrix.write_text("topologies: [ring-2]\nworkloads: [idle, {name: wl/repro.yaml, duration: 5}]\n")
    spec = load_matrix(str(matrix))
    assert [r.id for r in spec.runs] == ["ring-2.stock.idle.default.r1", "ring-2.stock.repro.default.r1"]
    assert spec.runs[1].workload.spec == str((tmp_path / "wl" / "repro.yaml").resolve())
    assert "file" not in spec.runs[0].params()["workload"]  # a built-in's fingerprint is as it was
    proc = numalab("matrix", "check", str(matrix), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "workloads: idle, repro" in proc.stdout
    matrix.write_text("topologies: [ring-2]\nworkloads: [idle, wl/gone.yaml]\n")
    proc = numalab("matrix", "check", str(matrix), timeout=60)
    assert_one_line_error(proc, "workloads[1]: workload file", "gone.yaml: cannot read")


def test_hackbench_is_scaled_and_read() -> None:
    from lab.workloads.registry import get_workload

    w = get_workload("hackbench")
    assert w.tools == ("hackbench",) and w.programs == ()
    assert image_layers.GUEST_TOOLS["hackbench"] == "/usr/bin/hackbench"
    topo = load_topology("ring-2")
    assert f"hackbench -p -g {topo.total_cpus} -f 4 -l 50" in w.command(topo, 3)
    assert "+ 3))" in w.command(topo, 2.6)
    out = "Running in process mode with 4 groups\nTime: 0.25\nTime: 0.75\nTime: nan\nTime: -1\n"
    assert parse_output(w, out) == {"hackbench_s": 0.5, "hackbench_runs": 2}
    assert parse_output(w, "Time:\n") == {"parse_error": "no hackbench 'Time:' line in the workload output"}
    assert get_metric("workload.hackbench_s").better == "lower"


def test_defaults_and_bounds(tmp_path: Path) -> None:
    # A file's name is the default workload name, made fit for a run id.
    w = load_workload_file(_file(tmp_path, "command: x\n" + JSON + METRICS, "my repro (v2).yaml"))
    assert w.name == "my-repro-v2"
    # regex reads the output's last MiB only (the guest writes what the user's patterns run over)
    rx = _workload(_spec(json_prefix="", regex=(("ops", r"ops: (\S+)"),), metrics=(UserMetric("ops"),)))
    assert parse_output(rx, "ops: 1\n" + "x" * (1 << 20)) == {
        "parse_error": "ops: no match for 'ops: (\\\\S+)' in the workload output"
    }
    assert parse_output(rx, "x" * (1 << 20) + "ops: 3\n") == {"ops": 3.0}


def test_verdicts_gates_and_decide_know_declared_metrics(tmp_path: Path) -> None:
    from lab.analysis.verdict import verdicts_of

    base = [_manifest(10, 5) | {"accelerator": {"name": "tcg"}} for _ in range(3)]
    new = [_manifest(20 + i, 2) | {"accelerator": {"name": "tcg"}} for i in range(3)]
    ops, lat = verdicts_of(base, new, ["workload.ops", "workload.lat"])
    assert (ops.better, ops.direction, lat.better, lat.direction) == ("higher", "better", "lower", "better")

    _static_program(tmp_path, "prog", "-static")
    _file(tmp_path, GOOD, "repro.yaml")
    gate = "gates: [{metric: workload.ops_per_s, worse_than_baseline_pct: 5}]\n"
    matrix = _file(tmp_path, "topologies: [ring-2]\nworkloads: [idle, repro.yaml]\n" + gate, "m.yaml")
    assert load_matrix(str(matrix)).declared == ("workload.latency_us", "workload.ops_per_s")
    matrix.write_text("topologies: [ring-2]\nworkloads: [idle]\n" + gate)
    with pytest.raises(LabError, match="gates\\[0\\].metric: unknown metric 'workload.ops_per_s'"):
        load_matrix(str(matrix))

    args = ["run", "--workload", str(tmp_path / "repro.yaml"), "--kernel", "stock", "--kernel", "/nonexistent/bzImage",
            "--repeat", "auto", "--topology", "ring-2"]  # fmt: skip
    proc = numalab(*args, "--decide", "workload.nope", timeout=60)
    assert_one_line_error(proc, "--decide: metric 'workload.nope': unknown", "workload.ops_per_s")
    proc = numalab(*args, "--decide", "workload.ops_per_s", timeout=60)
    assert_one_line_error(proc, "/nonexistent/bzImage")  # past --decide: the kernel is what is wrong


def test_a_package_gives_its_programs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab.workloads import user_workload

    programs = user_workload.package_programs("hostname", "packages[0]")  # (Essential: on every Debian host)
    assert "/bin/hostname" in programs and all(Path(p).parent.name in ("bin", "sbin") for p in programs)
    w = load_workload_file(_file(tmp_path, "command: hostname\npackages: [hostname]\n" + JSON + METRICS))
    assert w.user is not None and "/bin/hostname" in w.user.tools and w.user.record()["packages"] == ["hostname"]
    monkeypatch.setattr(user_workload, "BIN_DIRS", ("/nowhere/",))
    with pytest.raises(LabError, match="packages\\[0\\] hostname: the package has no program in /nowhere/"):
        user_workload.package_programs("hostname", "packages[0]")


# Issue 38: a backtracking pattern, patterns RE2 cannot run, built-in metric names, the files that are no files.
REGEX = "command: x\nresults: {regex: {a: 'PATTERN'}}\n" + METRICS


def test_a_backtracking_pattern_over_hostile_output_takes_linear_time() -> None:
    """'^(a+)+$' over 44 'a' and a '!' took Python's re minutes (the host hung after the VM powered off);
    RE2 reads the whole 1 MiB tail in well under a second."""
    spec = UserSpec("w.yaml", "0" * 64, "x", (), (), (), regex=(("a", "^(a+)+$"),), metrics=(UserMetric("a"),))
    for text in ("a" * 44 + "!\n", ("a" * 1000 + "!\n") * 1100):
        t0 = time.monotonic()
        assert parse_user(spec, text) == {"parse_error": "a: no match for '^(a+)+$' in the workload output"}
        assert time.monotonic() - t0 < 2
    assert parse_user(spec, "x\n" + "a" * 5000 + "\n")["parse_error"].endswith("is not a finite number")


@pytest.mark.parametrize("pattern, why", [(r"(a)\1", "invalid escape sequence"), ("(?=x)(a)", "invalid perl operator"),
                                          ("((a{1000}){1000})", "invalid repetition size")])  # fmt: skip
def test_a_pattern_re2_cannot_run_is_refused_by_show_and_run_alike(tmp_path: Path, pattern: str, why: str) -> None:
    path = _file(tmp_path, REGEX.replace("PATTERN", pattern))
    needles = (f"workload file {path}: results.regex.a: not a regular expression RE2 can run", why)
    assert_one_line_error(numalab("workload", "show", str(path), timeout=60), *needles)
    assert_one_line_error(numalab("run", "--workload", str(path), "--out", str(tmp_path / "r"), timeout=60), *needles)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "text, needle",
    [
        ("command: x\n" + JSON + "metrics: [{name: elapsed_s, higher_is_better: true}]\n",
         "metrics[0].name: elapsed_s is a built-in metric (lower is better)"),
        ("command: x\n" + JSON + "metrics: [{name: gbps, higher_is_better: false}]\n",
         "metrics[0].name: gbps is a built-in metric (higher is better)"),
        ("command: x\n" + JSON + "metrics: [{name: gbps_per_vcpu_s, higher_is_better: true}]\n",
         "metrics[0].name: gbps_per_vcpu_s is a built-in metric"),
        ("command: x\n" + JSON + "metrics: {a: {higher_is_better: true}}\n",
         "metrics: expected a list of {name, unit, higher_is_better, mean}, got a mapping"),
        (REGEX.replace("PATTERN", "(?P<v>x)(y)"), "results.regex.a: needs exactly one group"),
    ],
)  # fmt: skip
def test_show_run_and_matrix_check_refuse_a_workload_file_alike(tmp_path: Path, text: str, needle: str) -> None:
    """One validator (issue 38): workload show took a built-in metric's name that run and matrix check refused."""
    path = _file(tmp_path, text)
    matrix = _file(tmp_path, f"topologies: [ring-2]\nkernels: [stock]\nworkloads: [{path.name}]\n", "m.yaml")
    for proc in (numalab("workload", "show", str(path), timeout=60),
                 numalab("run", "--workload", str(path), "--out", str(tmp_path / "r"), timeout=60),
                 numalab("matrix", "check", str(matrix), timeout=60)):  # fmt: skip
        assert_one_line_error(proc, f"workload file {path}", needle)


def test_show_and_run_agree_on_every_workload_file_in_the_tests() -> None:
    from lab.run.options import RunOptions

    files = sorted((REPO / "tests").rglob("*.yaml"))
    workloads = [f for f in files if f.read_text(errors="replace").startswith(("command:", "name:", "#"))
                 and "\ncommand:" in "\n" + f.read_text(errors="replace")]  # fmt: skip
    assert len(workloads) >= 2
    for f in workloads:
        show = numalab("workload", "show", str(f), timeout=60)
        try:
            RunOptions(workload=str(f), topology=TopologyRef("ring-2"))
            run_error = ""
        except LabError as e:
            run_error = str(e)
        expected = (2, f"numalab: error: {run_error}") if run_error else (0, "")
        assert (show.returncode, show.stderr.strip()) == expected, f


@pytest.mark.parametrize("kind, make", [("a FIFO", lambda p: os.mkfifo(p)),
                                        ("a character device", lambda p: p.symlink_to("/dev/zero")),
                                        ("a directory", lambda p: p.mkdir())])  # fmt: skip
def test_a_file_that_is_no_regular_file_is_named_as_what_it_is(tmp_path: Path, kind: str, make) -> None:
    make(tmp_path / "odd")
    path = _file(tmp_path, "command: x\nfiles: [odd]\n" + JSON + METRICS)
    with pytest.raises(LabError, match=f"files\\[0\\] odd: {kind}, not a regular file"):
        load_workload_file(path)

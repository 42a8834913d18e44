"""Files a user hands numalab (issue #21): a spec from a colleague, run options, a run record from CI. Each
bad one is a one-line error naming the file (and the key or line), quickly: never a traceback, never a hang,
never accepted. Through the real CLI; no VM boots here."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

SPEC = "nodes: 2\ncpus_per_node: 1\nmemory_per_node: 256M\nlinks: [[0, 1]]\ndistance: {per_hop: 10}\n"
MATRIX = "name: m\ntopologies: [ring-2]\nworkloads: [idle]\n"
RECORD = REPO / "tests" / "data" / "runs" / "ring4-numa01-on-1"
BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")
)


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    return p


def _quick(*args: str, env: dict | None = None, limit: float = 60):
    """The CLI, which must answer within ``limit`` seconds (a hang fails here, not after ten minutes)."""
    return numalab(*args, timeout=limit, env=env)


# --- the reader: size, duplicate keys, aliases, depth, non-finite numbers, temporary names -------------------


@pytest.mark.parametrize("cmd", [("topo", "check"), ("matrix", "check"), ("matrix", "list"), ("run-options",)])
def test_a_100_mb_file_is_refused_quickly(tmp_path, cmd) -> None:
    big = tmp_path / ("big.json" if cmd == ("run-options",) else "big.yaml")
    with open(big, "wb") as f:
        f.truncate(100 << 20)  # (sparse: written in no time, read in seconds if it were read)
    t0 = time.monotonic()
    assert_one_line_error(_quick(*cmd, str(big)), str(big), "104,857,600 bytes, more than the")
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize(
    "cmd,text,needle",
    [
        (("topo", "check"), SPEC + "nodes: 3\n", "duplicate key 'nodes' at line 6 (first at line 1)"),
        (("matrix", "check"), MATRIX + "workloads: [pairs]\n", "duplicate key 'workloads' at line 4 (first at line 3)"),
        (("matrix", "check"), MATRIX + "settings: [{name: a, name: b}]\n", "duplicate key 'name' at line 4"),
    ],
)  # fmt: skip
def test_a_duplicate_key_is_refused_naming_key_and_line(tmp_path, cmd, text, needle) -> None:
    f = _write(tmp_path, "d.yaml", text)
    assert_one_line_error(_quick(*cmd, str(f)), f"{f}: {needle}")


def test_duplicate_key_in_run_options_json(tmp_path) -> None:
    f = _write(tmp_path, "o.json", '{"workload": "idle",\n "duration": 5,\n "workload": "pairs"}')
    assert_one_line_error(_quick("run-options", str(f)), f"{f}: duplicate key 'workload' in the object at line 1")


@pytest.mark.parametrize("cmd", [("topo", "check"), ("matrix", "check"), ("matrix", "list")])
def test_a_yaml_alias_bomb_is_refused_not_expanded(tmp_path, cmd) -> None:
    f = _write(tmp_path, "bomb.yaml", (SPEC if cmd[0] == "topo" else MATRIX) + BOMB)
    assert_one_line_error(_quick(*cmd, str(f), env={"NUMALAB_CACHE": str(tmp_path / "cache")}), str(f),
                          "more than 200,000 values once its aliases are expanded")  # fmt: skip


@pytest.mark.parametrize("cmd", [("topo", "check"), ("matrix", "check")])
def test_deep_yaml_nesting_is_one_line(tmp_path, cmd) -> None:
    f = _write(tmp_path, "deep.yaml", "x: " + "[" * 20000 + "]" * 20000 + "\n")
    assert_one_line_error(_quick(*cmd, str(f)), f"{f}: nested more than 64 levels deep")


def test_deep_run_options_json_is_one_line(tmp_path) -> None:
    f = _write(tmp_path, "o.json", "[" * 100000 + "]" * 100000)
    assert_one_line_error(_quick("run-options", str(f)), f"{f}: nested more than 64 levels deep")


@pytest.mark.parametrize(
    "text,needle",
    [
        (MATRIX + "timeout: .nan\n", "line 4: .nan is not a finite number"),
        (MATRIX + "duration: .inf\n", "line 4: .inf is not a finite number"),
        (MATRIX + "duration: -.Inf\n", "line 4: -.Inf is not a finite number"),
        (MATRIX + "repeats: " + "9" * 5000 + "\n", "a number with more than 4,300 digits"),
    ],
)
def test_non_finite_and_overlong_numbers_in_a_matrix(tmp_path, text, needle) -> None:
    f = _write(tmp_path, "m.yaml", text)
    assert_one_line_error(_quick("matrix", "check", str(f)), f"{f}: {needle}")


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_run_options(tmp_path, value) -> None:
    f = _write(tmp_path, "o.json", f'{{"duration": {value}}}')
    assert_one_line_error(_quick("run-options", str(f)), f"{f}: {value} is not a finite number")


def test_a_write_error_names_the_users_file_not_a_temporary_one(tmp_path) -> None:
    root = _fake_sysfs(tmp_path / "node", {0: ("0-1", "10 20"), 1: ("2-3", "20 10")})
    out = tmp_path / "no-such-dir" / "x.yaml"
    proc = _quick("topo", "import", "--from-sysfs", str(root), "--out", str(out))
    assert_one_line_error(proc, f"{out}: No such file or directory")
    assert ".tmp" not in proc.stderr


# --- run options: the value checks itself; run, run-options and the matrix refuse alike -------------------


CONFLICTS = [
    (["--no-trace", "--event", "sched:sched_switch"], "--event sched:sched_switch: not with --no-trace"),
    (["--no-trace", "--trace-mode", "record"], "--trace-mode record: not with --no-trace"),
    (["--min-pairs", "4"], "--min-pairs: only with --repeat auto"),
    (["--max-pairs", "4"], "--max-pairs: only with --repeat auto"),
    (["--min-repeats", "4"], "--min-pairs: only with --repeat auto"),
    (["--timeout", "nan"], "--timeout: must be more than 0"),
    (["--timeout", "-5"], "--timeout: must be more than 0"),
    (["--duration", "inf"], "--duration: must be 0.1 to 86400 seconds"),
    (["--boot-deadline", "nan"], "--boot-deadline: must be more than 0"),
    (["--repeat", "1001"], "--repeat: must be 1..1000, got 1001"),
    (["--repeat", "auto", "--max-pairs", "100000"], "--max-pairs: must be 1..1000"),
    (["--access-sample", "4"], "--access-sample: only with --access-matrix"),
    (["--remote-latency-ns", "80"], "--remote-latency-ns: only with --remote-latency slit"),
    (["--remote-latency", "slit", "--remote-latency-ns", "0"], "--remote-latency-ns: must be more than 0"),
    # --remote-latency with --clock virtual on a stock QEMU: tests/vm/test_vm_charged_clock.py (it needs QEMU 10,
    # which make test-fast does not fetch)
    (["--remote-latency", "slit", "--accel", "kvm"], "--remote-latency: needs TCG"),
    (["--remote-latency", "slit", "--backend", "libvirt"], "--remote-latency: only with --backend qemu"),
]


@pytest.mark.parametrize("flags,needle", CONFLICTS)
def test_run_refuses_conflicting_or_unbounded_options(tmp_path, flags, needle) -> None:
    kernels = ["--kernel", "stock", "--kernel", "x"] if "auto" in flags else []
    proc = _quick("run", "--topology", "ring-2", "--workload", "idle", *kernels, *flags, "--runs-dir", str(tmp_path))
    assert_one_line_error(proc, needle)
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "options,needle",
    [
        ({"no_trace": True, "events": ["sched:sched_switch"]}, "--event sched:sched_switch: not with --no-trace"),
        ({"no_trace": True, "trace_mode": "extract"}, "--trace-mode extract: not with --no-trace"),
        ({"repeat": 1000000}, "--repeat: must be 1..1000"),
        ({"timeout": -1}, "--timeout: must be more than 0"),
        ({"duration": 0}, "--duration: must be 0.1 to 86400 seconds"),
        ({"knobs": ["nonsense"]}, "--knob nonsense: expected NAME=VALUE"),
    ],
)
def test_run_options_file_is_checked_as_run_checks_its_flags(tmp_path, options, needle) -> None:
    f = _write(tmp_path, "o.json", json.dumps(options))
    assert_one_line_error(_quick("run-options", str(f)), f"{f}: {needle}")


@pytest.mark.parametrize(
    "extra,needle",
    [
        ("repeats: 1000000\n", "repeats: must be a whole number 1..1000 or auto, got 1000000"),
        ("repeats: 1e9\n", "repeats: must be a whole number 1..1000 or auto, got '1e9'"),
        ("repeats: 1001\n", "repeats: must be a whole number 1..1000"),
        ("repeats: auto\n", "repeats: auto compares the baseline's kernels, and the matrix has one (stock)"),
        ("repeats: auto\nauto: {max_pairs: 100000}\nkernels: [stock, x]\n", "auto.max_pairs: must be 1..1000"),
        ("repeats: auto\nauto: {max: 100000}\nkernels: [stock, x]\n", "auto.max: must be 1..1000"),  # (the old key)
        ("duration: 100000\n", "--duration: must be 0.1 to 86400 seconds"),
        ("timeout: 1000000000\n", "--timeout: must be more than 0 and at most"),
    ],
)
@pytest.mark.parametrize("cmd", ["check", "list"])
def test_matrix_refuses_what_run_refuses_and_returns_quickly(tmp_path, extra, needle, cmd) -> None:
    f = _write(tmp_path, "m.yaml", MATRIX + extra)
    assert_one_line_error(_quick("matrix", cmd, str(f), limit=30), str(f), needle)


def test_matrix_check_reads_a_build_recipes_files(tmp_path) -> None:
    f = _write(tmp_path, "m.yaml", MATRIX + "kernels: [stock, {name: fix, build: {patches: [missing.patch]}}]\n")
    assert_one_line_error(_quick("matrix", "check", str(f)), f"{f}: kernels: fix: build:", "missing.patch")
    ok = _write(tmp_path, "ok.yaml", MATRIX.replace("name: m", "name: ok"))
    assert _quick("matrix", "check", str(ok)).returncode == 0


# --- run records --------------------------------------------------------------------------------------------


def _record(tmp_path: Path, change) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RECORD, run)
    mf = run / "manifest.json"
    mf.write_text(change(mf.read_text()))
    return run


def test_a_record_of_an_unknown_format_version_is_refused(tmp_path) -> None:
    run = _record(tmp_path, lambda t: t.replace('"numalab-run/1"', '"numalab-run/99"'))
    for cmd in (("compare", "--baseline", str(run), "--new", str(run)), ("report", str(run))):
        assert_one_line_error(_quick(*cmd), f"{run}/manifest.json: format 'numalab-run/99': this numalab reads "
                                            "numalab-run/1 records only")  # fmt: skip


@pytest.mark.parametrize("value", ["NaN", "Infinity"])
def test_report_and_compare_on_a_record_holding_nan(tmp_path, value) -> None:
    run = _record(tmp_path, lambda t: t.replace('"metrics": {', f'"metrics": {{"bogus": {value}, ', 1))
    assert f'"bogus": {value}' in (run / "manifest.json").read_text()
    for cmd in (("report", str(run), "--out", str(tmp_path / "r.html")),
                ("compare", "--baseline", str(run), "--new", str(run))):  # fmt: skip
        assert_one_line_error(_quick(*cmd), f"{run}/manifest.json: {value} is not a finite number")
    assert not (tmp_path / "r.html").exists()


def test_a_record_with_a_duplicate_key_is_refused(tmp_path) -> None:
    run = _record(tmp_path, lambda t: t.replace('"status": ', '"status": "ok", "status": ', 1))
    assert_one_line_error(_quick("report", str(run)), f"{run}/manifest.json: duplicate key 'status'")


# --- topology imports and checks ------------------------------------------------------------------------------


def _fake_sysfs(root: Path, nodes: dict[int, tuple[str, str]]) -> Path:
    for node, (cpulist, distance) in nodes.items():
        d = root / f"node{node}"
        d.mkdir(parents=True)
        (d / "cpulist").write_text(cpulist + "\n")
        (d / "meminfo").write_text(f"Node {node} MemTotal:       {1 << 20} kB\n")
        (d / "distance").write_text(distance + "\n")
    return root


@pytest.mark.parametrize(
    "nodes,needle",
    [
        ({0: ("0-1", "10 20"), 1: ("1-2", "20 10")}, "node1/cpulist: CPU 1 is listed for node 0 and node 1"),
        ({0: ("0-1", "10 20"), 1: ("2-3", "30 10")}, "node1/distance: distance 1->0 is 30 but 0->1 is 20"),
    ],
)
def test_sysfs_import_refuses_what_numactl_import_refuses(tmp_path, nodes, needle) -> None:
    root = _fake_sysfs(tmp_path / "node", nodes)
    assert_one_line_error(_quick("topo", "import", "--from-sysfs", str(root)), needle)


def test_numactl_import_refuses_an_asymmetric_slit_too(tmp_path) -> None:
    text = (REPO / "tests" / "data" / "numactl" / "seed000.txt").read_text()
    assert "1: 20 10 40 40" in text
    f = _write(tmp_path, "n.txt", text.replace("1: 20 10 40 40", "1: 25 10 40 40"))
    assert_one_line_error(_quick("topo", "import", str(f)), f"{f}: distance 1->0 is 25 but 0->1 is 20")


def test_topo_check_writes_no_cache(tmp_path) -> None:
    spec = _write(tmp_path, "t.yaml", SPEC)
    env = {"NUMALAB_CACHE": str(tmp_path / "cache")}
    proc = _quick("topo", "check", str(spec), env=env)
    assert proc.returncode == 0, proc.stderr
    assert list((tmp_path / "cache").rglob("*.json")) == []
    assert _quick("topo", "show", str(spec), env=env).returncode == 0  # (a load that is not a check does cache)
    assert len(list((tmp_path / "cache").rglob("*.json"))) == 1


# --- kernel build: a held lock is said ------------------------------------------------------------------------


def test_a_held_build_lock_is_said_with_its_holder(tmp_path) -> None:
    from lab.kernel.build import _locked

    lock = tmp_path / ".lock"
    lock.write_text("pid 4242: numalab kernel build --name other\n")
    said: list[str] = []
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        holding = _locked(lock, said.append)
        t = threading.Thread(target=holding.__enter__, daemon=True)
        t.start()
        deadline = time.monotonic() + 30
        while not said and time.monotonic() < deadline:
            time.sleep(0.05)
        assert said == [f"waiting for the source tree's build lock {lock} (held by pid 4242: numalab kernel build "
                        "--name other)"]  # fmt: skip
        assert t.is_alive()  # still waiting
        fcntl.flock(held, fcntl.LOCK_UN)
    t.join(30)
    assert not t.is_alive()
    assert lock.read_text().startswith(f"pid {os.getpid()}: numalab ")  # the new holder says who it is
    holding.__exit__(None, None, None)
    assert lock.read_text() == ""


def test_kernel_build_says_it_waits_for_the_lock(tmp_path, monkeypatch) -> None:
    """The real command, on a source tree whose lock another process holds."""
    from lab.kernel.source import resolve_source, source_root

    src = tmp_path / "linux"
    src.mkdir()
    (src / "Makefile").write_text("all:\n")
    (src / "Kconfig").write_text("")
    monkeypatch.setenv("NUMALAB_CACHE", str(tmp_path / "cache"))
    env = dict(os.environ)
    lock = source_root(resolve_source(str(src))) / ".lock"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); fcntl.flock(f, fcntl.LOCK_EX); "
         "print('held', flush=True); time.sleep(120)", str(lock)],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        build = subprocess.Popen(
            [sys.executable, "-m", "lab.cli", "kernel", "build", "--source", str(src)],
            cwd=REPO, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        try:
            assert build.stderr is not None
            lines = []
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                line = build.stderr.readline()
                if not line:
                    break
                lines.append(line)
                if "waiting for" in line:
                    break
            assert any(f"waiting for the source tree's build lock {lock}" in ln for ln in lines), lines
            assert build.poll() is None  # still waiting
        finally:
            build.kill()
            build.communicate()  # (reaps it and closes its pipe)
    finally:
        holder.kill()
        holder.communicate()
        holder.wait()


def test_topo_import_from_standard_input_is_capped() -> None:
    proc = subprocess.run([sys.executable, "-m", "lab.cli", "topo", "import", "-"], input=b"0" * (3 << 20),
                          capture_output=True, cwd=REPO, timeout=60)  # fmt: skip
    assert proc.returncode == 2 and proc.stderr.decode().count("\n") == 1
    assert "-: standard input: more than the 1 MiB numactl -H output may be" in proc.stderr.decode()


@pytest.mark.parametrize("cmd", [("topo", "check"), ("run-options",)])
def test_a_fifo_nobody_writes_to_does_not_hang_the_reader(tmp_path, cmd) -> None:
    fifo = tmp_path / "f.yaml"
    os.mkfifo(fifo)
    assert_one_line_error(_quick(*cmd, str(fifo), limit=30), str(fifo))


@pytest.mark.parametrize("text", ["!!float\n", "x: !!int\n", 'a: !!float ""\n'])
def test_an_empty_value_tagged_as_a_number_is_one_line(tmp_path, text) -> None:
    """Found by tests/unit/test_datafile_props.py: PyYAML reads value[0] of an empty !!float or !!int."""
    spec = tmp_path / "t.yaml"
    spec.write_text(text)
    assert_one_line_error(numalab("topo", "check", str(spec)), str(spec), "an empty value tagged as a number")

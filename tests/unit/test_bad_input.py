"""Bad input and faults from issue #12's list: each is a one-line `numalab: error:` naming the field or
file, exit 2, and nothing half-written. (No VM boots here, except the full-disk case.)"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import shutil
import subprocess
from pathlib import Path

import pytest
from common import REPO, assert_one_line_error, numalab

RUN = ("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--accel", "tcg")


@contextlib.contextmanager
def _tmpfs(path: Path, *options: str):
    """A small tmpfs mounted at ``path`` (root only): a read-only or a nearly full filesystem."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(path)],
                                           capture_output=True).returncode != 0:  # fmt: skip
        pytest.skip("needs root to mount a tmpfs")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data if isinstance(data, bytes) else data.encode())
    return p


SPEC = "nodes: 2\ncpus_per_node: 1\nmemory_per_node: 256M\nlinks: [[0, 1]]\ndistance: {per_hop: 10}\n"


@pytest.mark.parametrize(
    "text,needles",
    [
        ("name: ../../escape\n" + SPEC, ["name: '../../escape' is not a usable name"]),
        ('name: "a\\0b"\n' + SPEC, ["name: 'a\\x00b' is not a usable name"]),
        ("name: a/b\n" + SPEC, ["name: 'a/b'"]),
        (SPEC.replace("per_node: 1", "per_node: 1000000000"), ["nodes[0].cpus: 1000000000 vCPUs, at most 288"]),
        (SPEC.replace("cpus_per_node: 1", "cpus_per_node: 200"), ["cpus: 400 vCPUs in all, at most 288"]),
        (SPEC.replace("256M", "99999999999999T"), ["nodes[0].memory: at most 16T a node"]),
    ],
)
def test_spec_names_and_sizes_are_bounded_before_anything_is_built(tmp_path, text, needles) -> None:
    spec = _write(tmp_path, "t.yaml", text)
    # 2 GiB of address space is plenty for numalab and far from the 24 GB a 10^9-CPU spec once took.
    limit = lambda: resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # noqa: E731
    proc = subprocess.run(
        [str(REPO / ".venv/bin/python"), "-m", "lab.cli", "topo", "check", str(spec)],
        capture_output=True, text=True, timeout=60, cwd=REPO, preexec_fn=limit,
    )  # fmt: skip
    assert_one_line_error(proc, str(spec), *needles)


def test_a_spec_named_by_its_file_is_checked_too(tmp_path) -> None:
    spec = _write(tmp_path, "my topo.yaml", SPEC)
    assert_one_line_error(numalab("topo", "check", str(spec)), "name: 'my topo' is not a usable name")


def test_a_matrix_name_cannot_escape(tmp_path) -> None:
    m = _write(tmp_path, "m.yaml", "name: ../../x\ntopologies: [ring-2]\nkernels: [stock]\nworkloads: [idle]\n")
    assert_one_line_error(numalab("matrix", "check", str(m)), str(m), "name: '../../x' is not a usable name")


@pytest.mark.parametrize("cmd", [("topo", "check"), ("topo", "show"), ("run", "--topology")])
def test_non_utf8_spec(tmp_path, cmd) -> None:
    spec = _write(tmp_path, "bad.yaml", SPEC.encode() + b"description: caf\xe9\n")
    assert_one_line_error(numalab(*cmd, str(spec)), str(spec), "not UTF-8 text (line 6)")


def test_non_utf8_matrix_fragment_and_series(tmp_path) -> None:
    m = _write(tmp_path, "m.yaml", b"name: m\ntopologies: [ring-2\xff]\n")
    assert_one_line_error(numalab("matrix", "check", str(m)), f"matrix {m}: not UTF-8 text (line 2)")
    frag = _write(tmp_path, "x.config", b"CONFIG_NUMA=y\n# \xff\n")
    assert_one_line_error(numalab("kernel", "build", "--fragment", str(frag)), f"--fragment {frag}: not UTF-8")
    series = _write(tmp_path, "series", b"\xff.patch\n")
    assert_one_line_error(numalab("kernel", "build", "--series", str(series)), f"--series {series}: not UTF-8")


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--duration", "nan"], "--duration: must be 0.1 to 86400 seconds"),
        (["--duration", "inf"], "--duration: must be 0.1 to 86400 seconds"),
        (["--duration", "1e9"], "--duration: must be 0.1 to 86400 seconds"),
        (["--duration", "0.0001"], "a shorter workload cannot be timed), got 0.0001"),
        (["--timeout", "0"], "--timeout: must be more than 0"),
        (["--timeout", "-1"], "--timeout: must be more than 0"),
        (["--timeout", "nan"], "--timeout: must be more than 0"),
        (["--repeat", "0"], "--repeat: must be 1..1000"),
        (["--guest-output-limit", "1K"], "--guest-output-limit: must be a whole number of MiB"),
        (["--guest-output-limit", "0"], "--guest-output-limit: must be positive"),
        (["--guest-output-limit", "lots"], "--guest-output-limit: expected a size"),
        (["--trace-buffer-kb", "99999999999"], "--trace-buffer-kb: must be 1..4194304"),
        (["--event", "sched/bad"], "--event sched/bad: expected SYSTEM:EVENT"),
        (["--cpus-per-node", "1000000000"], "at most 288"),
        (["--mem-per-node", "99999999999999T"], "at most 16T a node"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["--workload"], "argument --workload: expected one argument"),
    ],
)
def test_bad_run_numbers_and_usage_are_one_line(args, needle) -> None:
    assert_one_line_error(numalab(*RUN, *args, timeout=120), needle)


def test_run_out_that_cannot_be_a_new_directory(tmp_path) -> None:
    afile = _write(tmp_path, "afile", "x")
    cases = [
        (afile / "run", f"--out {afile}/run: cannot make the run record there ({afile} is not a directory)"),
        (Path("/proc/numalab-run"), "--out /proc/numalab-run: cannot make the run record there"),
        (afile, f"--out {afile}: already exists"),
    ]
    for out, needle in cases:
        proc = numalab(*RUN, "--out", str(out), timeout=120)
        assert_one_line_error(proc, needle)
        assert proc.returncode == 2
    with _tmpfs(tmp_path / "ro", "ro", "size=1m") as ro:
        proc = numalab(*RUN, "--out", str(ro / "run"), timeout=120)
        assert_one_line_error(proc, f"--out {ro}/run: cannot make the run record there (Read-only file system)")
        assert os.listdir(ro) == []


def test_report_problems_leave_nothing_half_written(tmp_path) -> None:
    run = REPO / "tests" / "data" / "runs" / "ring4-numa01-on-1"
    d = tmp_path / "adir"
    d.mkdir()
    assert_one_line_error(numalab("report", str(run), "--out", str(d)), f"--out {d}: is a directory")
    assert os.listdir(tmp_path) == ["adir"] and os.listdir(d) == []
    with _tmpfs(tmp_path / "ro", "ro", "size=1m") as ro:
        assert_one_line_error(numalab("report", str(run), "--out", str(ro / "r.html")), f"--out {ro}/r.html")
    with _tmpfs(tmp_path / "full", "size=64k") as full:
        proc = numalab("report", str(run), "--out", str(full / "r.html"))
        assert_one_line_error(proc, f"--out {full}/r.html: cannot write", "No space left on device")
        assert os.listdir(full) == [], os.listdir(full)  # no r.json, r.md, .r.html.tmp


@pytest.mark.parametrize(
    "manifest,needle",
    [
        ([1, 2], "not a numalab run manifest (no 'format"),
        ({"format": "numalab-run/1", "run_id": 5}, "'run_id' is missing or not a str"),
        ("BROKEN", "not valid JSON"),
    ],
)
def test_report_on_a_manifest_of_the_wrong_shape(tmp_path, manifest, needle) -> None:
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "runs" / "ring4-numa01-on-1", run)
    good = json.loads((run / "manifest.json").read_text())
    if isinstance(manifest, dict):
        manifest = good | manifest
    (run / "manifest.json").write_text(manifest if isinstance(manifest, str) else json.dumps(manifest))
    for cmd in (("report", str(run), "--out", str(tmp_path / "r.html")), ("compare", "--baseline", str(run),
                                                                           "--new", str(run))):  # fmt: skip
        assert_one_line_error(numalab(*cmd), f"{run}/manifest.json", needle)
    assert not (tmp_path / "r.html").exists()
    bad_types = good | {"kernel": {"name": ["x"]}}
    (run / "manifest.json").write_text(json.dumps(bad_types))
    assert_one_line_error(numalab("report", str(run)), "'kernel.name' is missing or not a str")


def test_matrix_out_that_is_a_file(tmp_path) -> None:
    afile = _write(tmp_path, "afile", "x")
    proc = numalab("matrix", "run", "ci-smoke", "--out", str(afile), "--shard", "1/6")
    assert_one_line_error(proc, f"--out {afile}: exists and is not a directory")


@pytest.mark.vm
def test_a_full_disk_while_writing_the_record_is_one_line_and_leaves_nothing(tmp_path) -> None:
    with _tmpfs(tmp_path / "full", "size=256k") as full:
        proc = numalab(*RUN, "--out", str(full / "run"), timeout=300)
        # (the progress lines come first: the error is the one last line)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr
        errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("numalab: error:")]
        assert errors == [proc.stderr.splitlines()[-1]], proc.stderr
        assert "writing the run record" in errors[0] and "No space left on device" in errors[0]
        assert os.listdir(full) == [], os.listdir(full)


def test_an_old_record_whose_topology_name_the_rule_now_refuses_still_reads(tmp_path) -> None:
    """Names are checked where they come from (spec files), not when a recorded topology is read back."""
    from lab.analysis.record import RunRecord

    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / "runs" / "ring4-numa01-on-1", run)
    m = json.loads((run / "manifest.json").read_text())
    m["topology"]["name"] = "my topo"
    (run / "manifest.json").write_text(json.dumps(m))
    assert RunRecord.load(run).topology.name == "my topo"


def test_a_qemu_that_does_not_answer_as_qemu_is_refused_before_any_run(tmp_path) -> None:
    """--qemu /bin/true (an ELF binary whose --version is its own, or nothing): a one-line error, no record."""
    out = tmp_path / "run"
    assert_one_line_error(numalab(*RUN, "--qemu", "/bin/true", "--out", str(out)),
                          "--qemu /bin/true: '--version' answered", "not a QEMU")  # fmt: skip
    assert not out.exists() and not list(tmp_path.iterdir())


# Issue 38's bad-input sweep: each refused with a one-line error, or accepted with the reason in --help.


def test_a_series_that_lists_a_patch_twice_is_refused(tmp_path) -> None:
    (tmp_path / "a.patch").write_text("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n")
    series = _write(tmp_path, "series", "a.patch\n# a comment\na.patch -p1\n")
    assert_one_line_error(numalab("kernel", "build", "--series", str(series)),
                          f"--series {series}:3: a.patch: listed twice (line 1 too)")  # fmt: skip


def test_bisect_max_pairs_is_bounded_up_front() -> None:
    from lab.analysis.ab_plan import ABPlan
    from lab.bisect.engine import Config
    from lab.errors import LabError

    with pytest.raises(LabError, match=r"--max-pairs: must be 1\.\.1000, got 100000"):
        Config(ABPlan(("timings.boot_s",), max_pairs=100000), ("a.patch",)).check()


def test_the_same_run_on_both_sides_of_compare_is_refused(tmp_path) -> None:
    run = REPO / "tests" / "data" / "runs" / "ring2-idle"
    assert_one_line_error(numalab("compare", "--baseline", str(run), "--new", str(run)),
                          f"compare: {run} is the same run on both sides (--baseline and --new)")  # fmt: skip
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    assert_one_line_error(numalab("compare", "--baseline", str(run), "--new", str(copy)),
                          f"compare: {copy} is the same run (run id", "on both sides")  # fmt: skip


def test_a_link_listed_twice_is_refused_and_slit_255_is_a_distance(tmp_path) -> None:
    twice = _write(tmp_path, "t.yaml", SPEC.replace("links: [[0, 1]]", "links: [[0, 1], [1, 0]]"))
    assert_one_line_error(numalab("topo", "check", str(twice)), str(twice), "links[1]: [1, 0] is links[0] again")
    far = _write(tmp_path, "far.yaml", SPEC.replace("distance: {per_hop: 10}", "distances: [[10, 255], [255, 10]]"))
    proc = numalab("topo", "check", str(far))
    assert proc.returncode == 0, proc.stderr
    helptext = " ".join(numalab("topo", "check", "--help").stdout.split())
    assert "255, ACPI's 'unreachable', is accepted as a distance" in helptext


def test_kernel_build_jobs_0_is_the_hosts_cpus_and_below_is_refused() -> None:
    assert_one_line_error(
        numalab("kernel", "build", "--make-jobs", "-1"), "--make-jobs: must be 1..4096, or 0 for the host's CPUs"
    )
    assert_one_line_error(numalab("kernel", "build", "--jobs", "5000"), "--make-jobs: must be 1..4096")
    assert "0: the host's CPUs" in " ".join(numalab("kernel", "build", "--help").stdout.split())


def test_matrix_check_refuses_a_qemu_that_does_not_answer_as_qemu(tmp_path) -> None:
    m = _write(tmp_path, "m.yaml", "topologies: [ring-2]\nkernels: [stock]\nworkloads: [idle]\n"
                                   "settings: [{name: t, qemu: /bin/true}]\n")  # fmt: skip
    assert_one_line_error(numalab("matrix", "check", str(m)), str(m), "settings t: --qemu /bin/true: '--version'",
                          "not a QEMU")  # fmt: skip


def test_an_out_path_that_is_not_one_printable_line_is_refused(tmp_path) -> None:
    """--out takes one printable line, as --append does: a newline, a tab or another control character in the path
    is refused, naming --out, before anything is written or booted (run's kernel is left not there, so that a run
    that took the path would stop at it, not boot)."""
    from lab.errors import LabError
    from lab.run.options import RunOptions

    with pytest.raises(LabError, match=r"^--out .*run\\x0axyz: not one printable line"):
        RunOptions(out=tmp_path / "run\nxyz")
    with pytest.raises(LabError, match=r"^--runs-dir .*runs\\x1b\[2J: not one printable line"):
        RunOptions(runs_dir=tmp_path / "runs\x1b[2J")
    no_kernel = ("--kernel", str(tmp_path / "no-bzImage"))
    cases = [
        ("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--accel", "tcg", *no_kernel,
         "--out", str(tmp_path / "run\nxyz")),
        ("report", str(REPO / "tests/data/runs/ring2-idle"), "--out", str(tmp_path / "r\tx.html")),
        ("topo", "import", "--hwloc-synthetic", "pack:1 numa:2 core:2 pu:1", "--out", str(tmp_path / "t\x07.yaml")),
    ]  # fmt: skip
    for argv in cases:
        proc = numalab(*argv, timeout=120)
        assert_one_line_error(proc, "--out", "not one printable line")
        assert "\n" not in proc.stderr.rstrip("\n") and "\x07" not in proc.stderr, proc.stderr
    assert os.listdir(tmp_path) == []

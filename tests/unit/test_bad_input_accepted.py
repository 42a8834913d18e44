"""Bad input that was accepted (issue #47): each is now refused with a one-line error, or its effect is said,
never a silent default. No VM boots here: a command that would boot one is refused before it does."""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from common import REPO, assert_one_line_error, numalab

from lab.record_files import QEMU_LOG

# --- nested: its --timeout is run's, and a QEMU that fails says so -----------------------------------------


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "1e9"])
def test_nested_refuses_a_timeout_run_refuses_before_any_vm(tmp_path, value) -> None:
    out = tmp_path / "nested"
    proc = numalab("nested", f"--timeout={value}", "--out", str(out), "--", "true", timeout=120)
    assert_one_line_error(proc, "--timeout: must be more than 0 and at most 604800 seconds")
    assert not out.exists()  # (refused before the outer guest was made)
    # the same words as run's, for the same value
    run = ("run", "--topology", "ring-2", "--workload", "idle", "--duration", "1", "--accel", "tcg")
    assert_one_line_error(numalab(*run, f"--timeout={value}", timeout=120), proc.stderr.strip().split("error: ", 1)[1])


FAILING_QEMU = "echo 'qemu-system-x86_64: -cpu max: CPU model max is not supported here' >&2; exit 1"


def test_nested_says_its_qemu_failed_and_why_in_one_line(tmp_path, monkeypatch) -> None:
    """The outer guest's QEMU exits at once with an error: the result carries QEMU's own words and exit code,
    and what a person reads is one line saying so, not 'booted (?); the command exited None'."""
    from lab.host import nested
    from lab.placement.pinning import Backing, Placement
    from lab.topology.model.ref import TopologyRef
    from lab.vm.qemu.qemu_backend import run_vm

    class FailingQemu:  # the real QEMU runner (lab.vm.qemu.qemu_backend.run_vm) on a "QEMU" that fails
        def __init__(self, emulator=None) -> None:
            self.emulator = emulator

        def run(self, req):
            argv = ["sh", "-c", FAILING_QEMU]
            bare = Placement((), (), Backing(), 1)  # (plan_placement is stubbed out below: nothing pinned)
            return run_vm(dataclasses.replace(req, placement=bare), argv), {}

    stock = SimpleNamespace(image=tmp_path / "vmlinuz", modules_dir=None)
    monkeypatch.setattr(nested, "resolve_kernel", lambda _spec: stock)
    monkeypatch.setattr(nested, "outer_initrd", lambda work, *_a, **_k: work / "initrd")
    monkeypatch.setattr(nested, "read_inventory", lambda: None)
    monkeypatch.setattr(nested, "plan_placement", lambda *_a, **_k: None)
    monkeypatch.setattr(nested, "QemuBackend", FailingQemu)
    topo = TopologyRef("ring-2", 1, "256M").load()
    res = nested.run_nested(
        topo, "true\n", tmp_path / "out", nested.OuterGuest(cache_from=tmp_path / "no-cache"), timeout_s=60
    )
    assert res.exit_code is None and not res.timed_out
    assert res.vm_failure == "QEMU exited with 1: qemu-system-x86_64: -cpu max: CPU model max is not supported here"
    assert res.qemu_log == tmp_path / "out" / ".outer" / QEMU_LOG
    lines = res.lines(topo.name)
    assert lines == [
        f"outer guest: ring-2 (QEMU {res.qemu['version']}): its QEMU failed before the guest booted: {res.vm_failure} "
        f"(QEMU's output: {res.qemu_log}); the command never ran"
    ]
    assert "None" not in lines[0] and "booted (?)" not in lines[0]


def test_nested_lines_of_a_guest_that_ran() -> None:
    """A guest that booted and ran its command reads as before; one whose QEMU was killed later says that too."""
    from lab.host.nested import NestedResult

    out = Path("/tmp/n")
    ran = NestedResult(0, {"booted": "2 svm npt /dev/kvm"}, 25.0, out, out / "console.log", False)
    assert ran.lines("ring-2") == [
        f"outer guest: ring-2, booted (2 svm npt /dev/kvm); the command exited 0 after 25s in all; what it wrote to "
        f"$NESTED_OUT is in {out}"
    ]
    killed = NestedResult(None, {"booted": "2"}, 90.0, out, out / "console.log", False, "partial",
                          vm_failure="QEMU was killed by SIGKILL", qemu_log=out / ".outer" / QEMU_LOG)  # fmt: skip
    lines = killed.lines("ring-2")
    assert "the command never ran to its end after 90s" in lines[0]
    assert (
        lines[1] == f"outer guest: its QEMU failed: QEMU was killed by SIGKILL (QEMU's output: {out}/.outer/{QEMU_LOG})"
    )


# --- compare: a second --baseline adds to the first, as --new does ----------------------------------------

RUNS = REPO / "tests" / "data" / "runs"


def test_compare_baseline_and_new_given_twice_add_up() -> None:
    on = [str(RUNS / f"ring4-numa01-on-{i}") for i in (1, 2, 3)]
    off = [str(RUNS / f"ring4-numa01-off-{i}") for i in (1, 2, 3)]
    proc = numalab("compare", "--baseline", on[0], "--baseline", on[1], on[2], "--new", off[0], off[1], "--new", off[2],
                   "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    c = json.loads(proc.stdout)
    assert c["baseline_runs"] == ["ring4-numa01-on-1", "ring4-numa01-on-2", "ring4-numa01-on-3"]
    assert c["new_runs"] == ["ring4-numa01-off-1", "ring4-numa01-off-2", "ring4-numa01-off-3"]
    assert "repeatable" in " ".join(numalab("compare", "--help").stdout.split())


def test_compare_refuses_a_run_given_twice_on_one_side() -> None:
    on = str(RUNS / "ring4-numa01-on-1")
    proc = numalab("compare", "--baseline", on, "--baseline", on, "--new", str(RUNS / "ring4-numa01-off-1"))
    assert_one_line_error(proc, f"compare: {on} is the same run twice on --baseline: it would count twice")


# --- a record marked ok is held to the checks its run makes ------------------------------------------------


def _copies(tmp_path: Path, names: list[str], edits: dict[str, Callable[[dict], None]] | None = None) -> list[Path]:
    """Copies of tests/data/runs records, each ``edits[name]`` applied to its manifest (as a hand or another tool
    would)."""
    out = []
    for name in names:
        d = tmp_path / name
        shutil.copytree(RUNS / name, d)
        if edits and name in edits:
            m = json.loads((d / "manifest.json").read_text())
            edits[name](m)
            (d / "manifest.json").write_text(json.dumps(m))
        out.append(d)
    return out


def _set(section: str, key: str, value: object) -> Callable[[dict], None]:
    def edit(m: dict) -> None:
        node = m
        for part in section.split("."):
            node = node[part]
        node[key] = value

    return edit


ON = [f"ring4-numa01-on-{i}" for i in (1, 2, 3)]
OFF = [f"ring4-numa01-off-{i}" for i in (1, 2, 3)]


def _warnings(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("numalab: warning: ")]


def test_a_headline_metric_given_as_true_is_named_not_dropped(tmp_path) -> None:
    """gbps: true (a bool, which Python counts as an int) vanished from compare's table with exit 0."""
    base = _copies(tmp_path, ON, {ON[0]: _set("workload.result", "gbps", True)})
    new = _copies(tmp_path, OFF)
    proc = numalab("compare", "--baseline", *map(str, base), "--new", *map(str, new), "--json")
    assert proc.returncode == 0, proc.stderr
    assert _warnings(proc.stderr) == [
        f"numalab: warning: {base[0]}: marked ok, but the workload's gbps is true, not a number: read as implausible, "
        "as its run would have marked it"
    ]
    c = json.loads(proc.stdout)
    assert c["excluded"] == [f"{ON[0]} (implausible)"] and c["baseline_runs"] == ON[1:]
    assert "workload.gbps" in {r["metric"] for r in c["metrics"]}  # (from the runs that have it as a number)


def test_type_problems_name_each_field() -> None:
    from lab.analysis.plausible import record_problems

    m = {"workload": {"name": "numa01", "result": {"gbps": True, "elapsed_s": "10", "thread_alloc": False}},
         "metrics": {"vmstat": {"numa_pages_migrated": True}, "events": {"sched_move_numa": [1]}},
         "timings": {"boot_s": False}}  # fmt: skip
    assert record_problems(m) == [
        "the workload's elapsed_s is '10', not a number",
        "the workload's gbps is true, not a number",
        "vmstat: numa_pages_migrated is true, not a number",
        "events: sched_move_numa is [1], not a number",
        "timings: boot_s is false, not a number",
    ]  # (thread_alloc is not a metric: a flag may be a bool)
    user = {"workload": {"name": "w", "spec": {}, "metrics": [{"name": "ok", "unit": ""}], "result": {"ok": True}}}
    assert record_problems(user) == ["the workload's ok is true, not a number"]


def test_negative_figures_in_a_record_marked_ok_are_left_out_of_compare_and_said(tmp_path) -> None:
    base = _copies(tmp_path, ON, {ON[1]: _set("workload.result", "elapsed_s", -5)})
    new = _copies(tmp_path, OFF, {OFF[0]: _set("metrics.vmstat", "numa_pages_migrated", -999999999999)})
    proc = numalab("compare", "--baseline", *map(str, base), "--new", *map(str, new))
    assert proc.returncode == 0, proc.stderr
    assert _warnings(proc.stderr) == [
        f"numalab: warning: {base[1]}: marked ok, but the workload's elapsed_s is -5, below 0: read as implausible, "
        "as its run would have marked it",
        f"numalab: warning: {new[0]}: marked ok, but vmstat: numa_pages_migrated went down by 999,999,999,999 between "
        "vmstat.start and vmstat.end (a counter only grows): read as implausible, as its run would have marked it",
    ]
    assert f"excluded: {ON[1]} (implausible)" in proc.stdout and f"excluded: {OFF[0]} (implausible)" in proc.stdout
    assert "baseline: stock (2 runs)   new: stock (balancing off) (2 runs)" in proc.stdout


def test_the_one_reader_rechecks_for_report_matrix_and_bisect(tmp_path) -> None:
    """RunRecord.load (compare, report, the matrix's summary) and load_manifest (bisect's runs, the matrix's
    repeats: auto) are one reader: a record that fails the run's checks reads as implausible in each."""
    from lab.analysis.record import RunRecord, load_manifest
    from lab.analysis.verdict import values
    from lab.report.report_model import build_report

    long = _set("workload.result", "elapsed_s", 500.0)  # a 10 s workload window on the host's clock
    (ok, bad) = _copies(tmp_path, ON[:2], {ON[1]: long})
    rec = RunRecord.load(bad)
    assert rec.status == "implausible" and "elapsed_s is 500 s, longer than the workload window" in rec.reason
    assert rec.manifest["record_problems"] == [rec.reason.removeprefix("the record fails a check its run makes: ")]
    assert RunRecord.load(ok).status == "ok"
    manifests = [load_manifest(d / "manifest.json") for d in (ok, bad)]
    assert [m["status"] for m in manifests] == ["ok", "implausible"]
    assert len(values(manifests, "workload.gbps")) == 1  # (bisect's and the matrix's verdicts: ok runs only)
    assert json.loads((bad / "manifest.json").read_text())["status"] == "ok"  # (the file is not changed)
    paths = build_report([ok, bad], tmp_path / "r.html")
    assert [r["status"] for r in paths.data["runs"]] == ["ok", "implausible"]


# --- --include-status: what "unless asked" leaves out can be asked for, and is marked -----------------------

MARK = "includes 1 run marked placement-broken"


def _status(status: str) -> Callable[[dict], None]:
    def edit(m: dict) -> None:
        m["status"], m["reason"] = status, f"made {status} for the test"

    return edit


@pytest.mark.parametrize("cmd", [("compare",), ("report",), ("matrix", "run"), ("matrix", "merge"), ("bisect",)])
def test_include_status_is_one_option_on_every_reader(cmd) -> None:
    helptext = " ".join(numalab(*cmd, "--help").stdout.split())
    assert "--include-status STATUS[,STATUS...]" in helptext and "placement-broken" in helptext


def test_include_status_refuses_an_unknown_status() -> None:
    proc = numalab("compare", "--baseline", str(RUNS / ON[0]), "--new", str(RUNS / OFF[0]), "--include-status",
                   "placement-broken,frob")  # fmt: skip
    assert_one_line_error(proc, "argument --include-status: 'frob' is not a run status (one of panic,", "or all)")
    from lab.cli.shared_options import NOT_OK_STATUSES, _statuses_arg

    assert _statuses_arg("all") == NOT_OK_STATUSES and "implausible" in NOT_OK_STATUSES
    assert _statuses_arg("ok,kernel-mismatch,kernel-mismatch") == ("kernel-mismatch",)


def test_compare_leaves_non_ok_runs_out_unless_asked_and_marks_them_when_asked(tmp_path) -> None:
    from lab.analysis import compare as cmp
    from lab.analysis.record import RunRecord
    from lab.report import ab_table

    base = [RunRecord.load(d) for d in _copies(tmp_path, ON, {ON[1]: _status("placement-broken")})]
    new = [RunRecord.load(d) for d in _copies(tmp_path, OFF)]
    default = cmp.compare_runs(base, new)
    assert default.base_runs == [ON[0], ON[2]] and default.excluded == [f"{ON[1]} (placement-broken)"]
    assert "--include-status placement-broken counts them" in " ".join(default.notes)
    assert not default.included and not any(r.included for r in default.rows)
    assert MARK not in ab_table.to_text(default) + ab_table.to_markdown(default) + ab_table.to_html(default)

    c = cmp.compare_runs(base, new, include_statuses=("placement-broken",))
    assert c.base_runs == ON and c.excluded == [] and c.included == [(ON[1], "placement-broken")]
    gbps = c.row("workload.gbps")
    assert gbps is not None and gbps.included == {"placement-broken": 1} and gbps.base.n == 3
    # (these records ran under plain TCG: the row's caveat follows the mark, lab.analysis.caveats)
    caveat = f": {gbps.caveat}"
    assert gbps.caveat and gbps.verdict_text() == f"{gbps.verdict()} † ({MARK}){caveat}"
    text, md, html = ab_table.to_text(c), ab_table.to_markdown(c), ab_table.to_html(c)
    assert f"note: the comparison {MARK} (asked for: --include-status)" in text
    mean_row = next(ln for ln in text.splitlines() if ln.startswith("Hmean    workload.gbps"))
    assert mean_row.endswith(f"† ({MARK}){caveat}"), mean_row
    assert f"| {gbps.verdict()} † ({MARK}){caveat} |" in md
    assert f"<small>{gbps.verdict()} † ({MARK}){caveat}</small>".replace("'", "&#x27;") in html
    data = json.loads(ab_table.to_json(c))
    assert data["included"] == [{"run": ON[1], "status": "placement-broken"}]
    row = next(m for m in data["metrics"] if m["metric"] == "workload.gbps")
    assert row["included_statuses"] == {"placement-broken": 1} and MARK in row["verdict_text"]
    # only the statuses asked for count
    assert cmp.compare_runs(base, new, include_statuses=("implausible",)).excluded == [f"{ON[1]} (placement-broken)"]


def test_compare_cli_counts_and_marks_an_included_status(tmp_path) -> None:
    base = _copies(tmp_path, ON, {ON[0]: _status("kernel-mismatch")})
    new = _copies(tmp_path, OFF)
    args = ("compare", "--baseline", *map(str, base), "--new", *map(str, new))
    assert f"excluded: {ON[0]} (kernel-mismatch)" in numalab(*args).stdout
    proc = numalab(*args, "--include-status", "all", "--format", "md")
    assert proc.returncode == 0, proc.stderr
    assert "includes 1 run marked kernel-mismatch" in proc.stdout and "excluded" not in proc.stdout


def test_report_and_matrix_summary_mark_included_runs(tmp_path) -> None:
    from lab.analysis.record import RunRecord
    from lab.matrix.definition import parse_matrix
    from lab.matrix.outputs import write_outputs
    from lab.matrix.schedule import run_dir
    from lab.report.report_model import build_report

    runs = _copies(tmp_path / "r", ON + OFF, {ON[1]: _status("placement-broken")})
    paths = build_report(runs, tmp_path / "r.html", include_statuses=("placement-broken",))
    (comp,) = paths.data["comparisons"]
    assert comp["included"] == [{"run": ON[1], "status": "placement-broken"}]
    assert MARK in paths.markdown.read_text() and MARK in paths.html.read_text()
    assert "counted in the comparison: --include-status" in paths.html.read_text()
    plain = build_report(runs, tmp_path / "plain.html")
    assert plain.data["comparisons"][0]["included"] == [] and MARK not in plain.html.read_text()

    spec = parse_matrix({"topologies": ["ring-4"], "kernels": ["a", {"name": "b", "path": "/bin/true"}],
                         "workloads": [{"name": "numa01", "duration": 10}], "repeats": 3,
                         "gates": [{"metric": "workload.gbps", "worse_than_baseline_pct": 5}]},
                        "t.yaml", "t")  # fmt: skip
    out = tmp_path / "m"
    for r in spec.runs:
        src = RUNS / (ON if r.kernel.name == "a" else OFF)[r.repeat - 1]
        shutil.copytree(src, run_dir(out, r))
        if r.kernel.name == "a" and r.repeat == 2:
            rec = RunRecord.load(run_dir(out, r))
            _status("placement-broken")(rec.manifest)
            (run_dir(out, r) / "manifest.json").write_text(json.dumps(rec.manifest))
    summary = write_outputs(spec, spec.runs, out, None, include_statuses=("placement-broken",))
    (comp,) = summary["comparisons"]
    assert comp["included"][0]["status"] == "placement-broken" and summary["include_statuses"] == ["placement-broken"]
    (gate,) = summary["gates"]
    assert f"; {MARK}" in gate["detail"], gate["detail"]  # (then the row's caveat: these ran under plain TCG)
    assert MARK in (out / "index.html").read_text() and MARK in (out / "junit.xml").read_text() + gate["detail"]
    default = write_outputs(spec, spec.runs, out, None)
    assert default["comparisons"][0]["included"] == [] and MARK not in default["gates"][0]["detail"]


def test_bisect_and_verdicts_count_an_included_status_and_say_so(tmp_path) -> None:
    from lab.analysis.ab_plan import ABPlan
    from lab.analysis.verdict import verdicts_of
    from lab.bisect.engine import Bisect, Config

    ms = {name: json.loads((RUNS / name / "manifest.json").read_text()) for name in ON + OFF}
    ms[ON[1]] |= {"status": "placement-broken", "reason": "vCPU 3 ran on CPU 9"}
    base, new = [ms[n] for n in ON], [ms[n] for n in OFF]
    (plain,) = verdicts_of(base, new, ["workload.gbps"])
    assert plain.n_base == 2 and "includes" not in plain.line()
    (v,) = verdicts_of(base, new, ["workload.gbps"], statuses=("ok", "placement-broken"))
    assert v.n_base == 3 and f"3+3 runs ({MARK})" in v.line() and v.to_dict()["included"] == {"placement-broken": 1}

    cfg = Config(ABPlan(("workload.gbps",)), ("a.patch",), include_statuses=("placement-broken",))
    assert Config.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert cfg.counted == ("ok", "topology-mismatch", "placement-broken")
    out = tmp_path / "bisect"
    for prefix, names in ((0, ON), (1, OFF)):
        for i, name in enumerate(names, 1):
            d = out / "runs" / f"p{prefix}-r{i}"
            d.mkdir(parents=True)
            (d / "manifest.json").write_text(json.dumps(ms[name]))
    asked = Bisect(out, cfg, runner=None, progress=lambda _m: None)  # type: ignore[arg-type]
    assert len(asked.values_of(0)) == 3 and MARK in asked.verdict(0, 1).line()
    assert asked.mismatch_lines(0) == ["prefix 0: 1 of 3 runs placement-broken (counted: --include-status): "
                                       "vCPU 3 ran on CPU 9"]  # fmt: skip
    default = Bisect(out, Config(ABPlan(("workload.gbps",)), ("a.patch",)), runner=None, progress=lambda _m: None)  # type: ignore[arg-type]
    assert len(default.values_of(0)) == 2 and "includes" not in default.verdict(0, 1).line()
    assert default.mismatch_lines(0) == []

"""The bisect over a scheduler's releases (lab.bisect.releases): the range and the versions in it, a release's
verdict from its runs' status, and the search with a fake runner (a regression, a fix, nothing to bisect, a
release that does not build, a resume); the CLI's one-line refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from common import numalab

from lab.bisect.releases import (
    ReleaseBisect,
    ReleaseConfig,
    ReleaseRange,
    is_release_state,
    judge,
    outcome,
    parse_range,
    release_log_text,
    release_result_text,
    versions_in,
)
from lab.errors import LabError
from lab.host.scx_release import Release
from lab.record_files import MANIFEST

LAYERED = ["1.0.21", "1.0.22", "1.0.23", "1.1.0", "1.1.1", "1.1.2", "1.1.3", "1.1.4"]


def _known(versions: list[str], yanked: tuple[str, ...] = ()) -> list[Release]:
    return [Release(v, "0" * 64, None, None, v in yanked) for v in versions]


def test_a_range_is_crate_old_new_and_the_schedulers_arguments() -> None:
    r = parse_range("scx_layered@1.0.23..1.1.0 --run-example")
    assert r == ReleaseRange("scx_layered", "1.0.23", "1.1.0", ("--run-example",))
    assert r.spec("1.0.23") == "scx_layered@1.0.23 --run-example"
    assert parse_range("scx_bpfland@1.1.0..1.1.4").args == ()


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("scx_layered@1.1.0", "expected CRATE@OLD..NEW"),
        ("scx_layered", "expected CRATE@OLD..NEW"),
        ("", "expected CRATE@OLD..NEW"),
        ("scx_layered@1.1.0..1.0.23", "the older release comes first (OLD..NEW)"),
        ("scx_layered@1.1.0..1.1.0", "the older release comes first"),
        ("scx_foo@1.0.0..1.1.0", "not a scx scheduler numalab builds"),
        ("scx_layered@1.0..1.1.0", "the version must be MAJOR.MINOR.PATCH"),
        ("scx_layered@1.0.23..1.1.0 'open", "No closing quotation"),
    ],
)
def test_a_bad_range_is_one_line_naming_the_option(text: str, says: str) -> None:
    with pytest.raises(LabError) as err:
        parse_range(text)
    assert str(err.value).startswith("--scheduler-releases") and says in str(err.value)
    assert "\n" not in str(err.value)


def test_the_versions_between_are_the_registrys_without_yanked_ones_and_pre_releases() -> None:
    known = _known([*LAYERED[:4], "1.1.1-rc1", *LAYERED[4:]], yanked=("1.1.2",))
    assert versions_in(parse_range("scx_layered@1.0.23..1.1.4"), known) == ["1.0.23", "1.1.0", "1.1.1", "1.1.3",
                                                                             "1.1.4"]  # fmt: skip
    assert versions_in(parse_range("scx_layered@1.0.23..1.1.0"), known) == ["1.0.23", "1.1.0"]  # (adjacent)
    with pytest.raises(LabError, match=r"^--scheduler-releases scx_layered@1.0.99: no such version.*nearest: "):
        versions_in(parse_range("scx_layered@1.0.99..1.1.0"), known)


def test_a_release_is_bad_when_a_run_was_ejected_good_when_all_ran_else_skipped() -> None:
    ok, ej = {"status": "ok"}, {"status": "scheduler-ejected", "reason": "panicked at src/main.rs:2108:22"}
    assert judge([ok]) == ("good", "the scheduler ran throughout")
    assert judge([ok, ok])[0] == "good"
    assert judge([ok, ej]) == ("bad", "panicked at src/main.rs:2108:22")
    assert judge([{"status": "timeout", "reason": "the VM did not power off"}]) == (
        "skip",
        "timeout: the VM did not power off",
    )
    assert judge([])[0] == "skip"


def test_outcome_names_the_first_bad_release_or_the_first_that_runs() -> None:
    v = ("1.0.23", "1.1.0", "1.1.1", "1.1.2", "1.1.3")
    assert outcome(v, "good", {2: "good", 3: "bad"}) | {} == {"sense": "regression", "status": "found",
                                                              "first_bad": "1.1.2", "last_old": "1.1.1",
                                                              "first_new": "1.1.2"}  # fmt: skip
    fix = outcome(v, "bad", {2: "good", 1: "bad"})
    assert fix["sense"] == "fix" and fix["first_good"] == "1.1.1" and fix["last_old"] == "1.1.0"
    assert outcome(v, "good", {})["next"] == "1.1.1"  # (the middle, the lower one on a tie, as git)
    assert outcome(v, "good", {2: "skip", 1: "good", 3: "bad"})["status"] == "undetermined"


class FakeRunner:
    """A release ``builds`` unless in ``broken``; its run's status is ``status_of[version]`` (ok by default)."""

    def __init__(self, status_of: dict[str, str], broken: tuple[str, ...] = ()) -> None:
        self.status_of, self.broken = status_of, broken
        self.built: list[str] = []
        self.ran: list[str] = []

    def build(self, version: str) -> float:
        if version in self.broken:
            raise LabError(f"scx_layered {version}: cargo build failed: error[E0599]")
        self.built.append(version)
        return 0.5

    def run(self, version: str, out: Path) -> dict:
        self.ran.append(version)
        status = self.status_of.get(version, "ok")
        m = {
            "format": "numalab-run/1",
            "status": status,
            "reason": "index out of bounds" if status == "scheduler-ejected" else None,
        }
        out.mkdir(parents=True)
        (out / MANIFEST).write_text(json.dumps(m))
        return m


def _cfg(versions: list[str], runs: int = 1) -> ReleaseConfig:
    rng = ReleaseRange("scx_layered", versions[0], versions[-1], ("--run-example",))
    return ReleaseConfig(rng, tuple(versions), "v6.12-scx", runs, {"topology": "mesh-9"})


def _bisect(out: Path, runner: FakeRunner, versions: list[str], runs: int = 1) -> dict:
    return ReleaseBisect(out, _cfg(versions, runs), runner, lambda _m: None).run()


def test_a_regression_names_the_first_bad_release_in_log2_steps(tmp_path: Path) -> None:
    ej = "scheduler-ejected"
    runner = FakeRunner({v: ej for v in LAYERED[4:]})  # 1.1.1 on panics
    r = _bisect(tmp_path / "b", runner, LAYERED)
    assert r["status"] == "found" and r["sense"] == "regression" and r["first_bad"] == "1.1.1"
    assert r["last_old"] == "1.1.0" and r["tested"] == len(runner.ran) <= 2 + 3
    assert runner.ran[:2] == ["1.0.21", "1.1.4"]  # the ends first
    assert release_result_text(r) == "# first bad release: 1.1.1 (the last good: 1.1.0)"
    assert is_release_state(tmp_path / "b")
    log = release_log_text([json.loads(ln) for ln in (tmp_path / "b" / "log.jsonl").read_text().splitlines()])
    assert "numalab bisect bad 1.1.1" in log and "numalab bisect good 1.1.0" in log and "first bad release" in log


def test_a_fix_names_the_first_release_that_runs(tmp_path: Path) -> None:
    runner = FakeRunner({v: "scheduler-ejected" for v in ("1.0.23", "1.1.0", "1.1.1")})
    r = _bisect(tmp_path / "b", runner, ["1.0.23", "1.1.0", "1.1.1", "1.1.2", "1.1.3", "1.1.4"])
    assert (r["status"], r["sense"], r["first_good"], r["last_old"]) == ("found", "fix", "1.1.2", "1.1.1")
    assert release_result_text(r) == "# first release that runs: 1.1.2 (the last ejected: 1.1.1)"


def test_ends_that_agree_leave_nothing_to_bisect(tmp_path: Path) -> None:
    runner = FakeRunner({})
    r = _bisect(tmp_path / "b", runner, ["1.0.23", "1.1.0"])
    assert r["status"] == "nothing-to-bisect" and "ran throughout with 1.0.23 and with 1.1.0" in r["reason"]
    assert runner.ran == ["1.0.23", "1.1.0"]


def test_a_release_that_does_not_build_is_stepped_around(tmp_path: Path) -> None:
    runner = FakeRunner({"1.1.4": "scheduler-ejected"}, broken=("1.1.2",))
    r = _bisect(tmp_path / "b", runner, LAYERED)
    assert r["status"] == "found" and r["first_bad"] == "1.1.4" and r["last_old"] == "1.1.3", r
    step = json.loads((tmp_path / "b" / "steps" / "1.1.2.json").read_text())
    assert step["verdict"] == "skip" and "does not build" in step["reason"]
    # the skipped one next to the change: the change is in one of the two, as git says
    r = _bisect(tmp_path / "c", FakeRunner({v: "scheduler-ejected" for v in LAYERED[6:]}, broken=("1.1.2",)), LAYERED)
    assert r["status"] == "undetermined" and r["candidates"] == ["1.1.2", "1.1.3"], r


def test_an_end_that_gives_no_verdict_is_said(tmp_path: Path) -> None:
    r = _bisect(tmp_path / "b", FakeRunner({"1.1.0": "timeout"}), ["1.0.23", "1.1.0"])
    assert r["status"] == "ends-unusable" and r["reason"].startswith("1.1.0 (an end) gave no verdict: timeout")


def test_step_runs_stop_at_the_first_ejection_and_a_resume_reruns_nothing(tmp_path: Path) -> None:
    runner = FakeRunner({"1.1.0": "scheduler-ejected"})
    r = _bisect(tmp_path / "b", runner, ["1.0.23", "1.1.0"], runs=3)
    assert r["status"] == "found" and r["first_bad"] == "1.1.0" and runner.ran == ["1.0.23"] * 3 + ["1.1.0"]
    again = FakeRunner({"1.1.0": "scheduler-ejected"})
    assert _bisect(tmp_path / "b", again, ["1.0.23", "1.1.0"], runs=3)["first_bad"] == "1.1.0"
    assert again.ran == [] and again.built == []
    with pytest.raises(LabError, match="holds a bisect with another step_runs"):
        _bisect(tmp_path / "b", again, ["1.0.23", "1.1.0"], runs=2)


def test_cli_refuses_what_a_release_bisect_does_not_take(tmp_path: Path) -> None:
    out = str(tmp_path / "b")
    cases = [((), "--kernel: required with --scheduler-releases"),
             (("--kernel", "v6.12-scx", "--decide", "workload"), "--decide: not with --scheduler-releases"),
             (("--kernel", "v6.12-scx", "--series", "x"), "--series: not with --scheduler-releases"),
             (("--kernel", "no-such-kernel-here"), "--kernel no-such-kernel-here: no such built kernel"),
             (("--kernel", "a", "--kernel", "b"), "--kernel: one with --scheduler-releases")]  # fmt: skip
    for extra, says in cases:
        proc = numalab("bisect", "--scheduler-releases", "scx_layered@1.0.23..1.1.0", "--out", out, *extra)
        assert proc.returncode == 2 and proc.stderr.startswith(f"numalab: error: {says}"), proc.stderr
        assert proc.stderr.count("\n") == 1
    proc = numalab("bisect", "--kernel", "v6.12-scx", "--series", "x", "--out", out)
    assert proc.returncode == 2 and "--kernel: only with --scheduler-releases" in proc.stderr

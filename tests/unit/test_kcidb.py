"""``numalab report --kcidb``: the runs and A/B verdicts in KCIDB's I/O format (lab.report.kcidb), built from the
real run records under tests/data/runs/ and validated with KernelCI's own kcidb-io (the dev extra has it;
numalab itself does not import it)."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from common import REPO, assert_one_line_error, numalab
from kcidb_io import schema as kcidb_schema

from lab.analysis.compare import compare_runs
from lab.analysis.metrics import metric_values
from lab.analysis.record import RunRecord
from lab.report.kcidb import VERDICT_STATUS, VERSION, kcidb_data, kcidb_path
from lab.report.report_model import comparisons_for

RUNS = REPO / "tests" / "data" / "runs"
OFF_ON = [RUNS / f"ring4-numa01-{b}-{i}" for b in ("off", "on") for i in (1, 2, 3)]
PAIRS = sorted(RUNS.glob("ring4x1-pairs-ab-*"))
SCHEMA = kcidb_schema.V5_3  # what lab.report.kcidb writes


def _data(dirs: list[Path]) -> dict:
    runs = [RunRecord.load(d) for d in dirs]
    return kcidb_data(runs, comparisons_for(runs)[0])


def _validate(data: dict) -> None:
    """As kcidb-submit would take it: strict JSON, then the schema (with its formats: date-time, uri)."""
    SCHEMA.validate_exactly(json.loads(json.dumps(data, allow_nan=False)))


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> dict:
    """``numalab report --kcidb`` over the balancing off/on records, as a user runs it: the file it wrote."""
    out = tmp_path_factory.mktemp("kcidb")
    proc = numalab("report", *map(str, OFF_ON), "--out", str(out / "report.html"), "--kcidb", str(out / "k.json"))
    assert proc.returncode == 0, proc.stderr
    assert f"kcidb:  {out / 'k.json'}" in proc.stdout and "not submitted" in proc.stdout
    return json.loads((out / "k.json").read_text())


def test_the_written_file_is_valid_kcidb(written) -> None:
    assert SCHEMA.major == VERSION["major"] and SCHEMA.minor == VERSION["minor"]
    _validate(written)
    kcidb_schema.LATEST.validate(written)  # (and for the newest schema this kcidb-io knows)
    assert written["version"] == {"major": 5, "minor": 3}


def test_a_checkout_a_build_and_a_test_per_run_and_metric(written) -> None:
    """One stock kernel: one checkout (Debian's release), one build (x86_64, the build-id its guests showed), a
    test per run with its status, and one per run and metric with its figure and unit."""
    [checkout] = written["checkouts"]
    [build] = written["builds"]
    assert checkout["origin"] == "numalab" and "6.1.0-56-amd64" in checkout["comment"]
    assert build["checkout_id"] == checkout["id"] and build["architecture"] == "x86_64" and build["status"] == "PASS"
    assert build["misc"]["booted_build_ids"] == ["eb4fbcd037e7253717950bf2b93bd5566f47c56f"]
    assert build["config_name"] == "debian"
    tests = written["tests"]
    assert all(t["build_id"] == build["id"] and t["origin"] == "numalab" for t in tests)
    runs = [t for t in tests if t["path"] == "numalab.run"]
    assert len(runs) == 6 and {t["status"] for t in runs} == {"PASS"}
    per_metric = [t for t in tests if t["path"].startswith("numalab.run.")]
    expected = sum(len(metric_values(RunRecord.load(d).manifest)) for d in OFF_ON)
    assert len(per_metric) == expected > 6 * 5
    gbps = next(t for t in per_metric if t["path"] == "numalab.run.workload.gbps")
    assert gbps["status"] == "DONE" and gbps["number"]["unit"] == "GB/s" and gbps["number"]["value"] > 0
    elapsed = next(t for t in per_metric if t["path"] == "numalab.run.workload.elapsed_s")
    assert elapsed["number"] == {"value": pytest.approx(10, abs=1), "unit": "s", "prefix": "metric"}


def test_the_verdicts_are_tests_with_their_figures(written) -> None:
    """numalab.ab.<metric>: the word's status, never PASS for undecided; misc has the p-value, the interval and
    the runs. The off/on A/B's 'worse' on GB/s carries the caveat (remote memory costs nothing under plain TCG):
    DONE, not a FAIL of the kernel; the mechanism counters' 'changed' is DONE."""
    ab = {t["path"]: t for t in written["tests"] if t["path"].startswith("numalab.ab.")}
    assert len(ab) == 12
    gbps = ab["numalab.ab.workload.gbps"]
    assert gbps["misc"]["verdict"] == "worse" and gbps["misc"]["caveat"] and gbps["status"] == "DONE"
    assert gbps["number"] == {"value": pytest.approx(-73.39, abs=0.01), "unit": "%"}
    assert gbps["misc"]["p_value"] == pytest.approx(0.0066, abs=1e-4) and len(gbps["misc"]["ci95_diff"]) == 2
    assert len(gbps["misc"]["baseline_runs"]) == len(gbps["misc"]["new_runs"]) == 3
    assert gbps["misc"]["baseline_label"] == "stock balancing=off" and gbps["misc"]["new_label"] == "stock"
    for t in ab.values():
        word = t["misc"]["verdict"]
        assert word != "undecided" or t["status"] == "DONE", t["path"]
        assert word != "changed" or t["status"] == "DONE", t["path"]
    assert ab["numalab.ab.vmstat.numa_pages_migrated"]["number"]["unit"] == "pages"  # (from a 0 baseline: Δ)
    assert VERDICT_STATUS["undecided"] != "PASS" and VERDICT_STATUS["unknown"] == "SKIP"


def test_better_and_worse_of_another_kernel_are_pass_and_fail() -> None:
    """Where the kernel is the difference (another binary) and no caveat applies, better is PASS and worse FAIL:
    the off runs against copies of themselves booted by a 'patched' kernel, boot time made 1.5 times as long,
    then 0.6 times as long."""
    base = [RunRecord.load(d) for d in OFF_ON[:3]]
    for factor, word, status in ((1.5, "worse", "FAIL"), (0.6, "better", "PASS")):
        new = []
        for r in base:
            m = copy.deepcopy(r.manifest)
            m["run_id"] += "-patched"
            m["kernel"] |= {"name": "patched", "sha256": "0" * 64, "build_id": "1" * 40}
            m["timings"]["boot_s"] *= factor
            new.append(RunRecord(r.path, m))
        c = compare_runs(base, new)
        data = kcidb_data(base + new, [c])
        _validate(data)
        assert len(data["checkouts"]) == len(data["builds"]) == 2
        [boot] = [t for t in data["tests"] if t["path"] == "numalab.ab.timings.boot_s"]
        assert (boot["misc"]["verdict"], boot["status"]) == (word, status)
        patched = next(b for b in data["builds"] if b["misc"]["kernel"] == "patched")
        assert boot["build_id"] == patched["id"]  # (a verdict is the new side's)


def test_ids_are_stable_across_reruns_and_unique() -> None:
    first, again = _data(PAIRS), _data(PAIRS)
    _validate(first)
    ids = [o["id"] for part in ("checkouts", "builds", "tests") for o in first[part]]
    assert len(ids) == len(set(ids))
    assert ids == [o["id"] for part in ("checkouts", "builds", "tests") for o in again[part]]
    assert all(i.startswith("numalab:") and len(i) == len("numalab:") + 32 for i in ids)
    same = [t for t in first["tests"] if t["path"].startswith("numalab.ab.") and t["misc"]["verdict"] == "same"]
    # (the same within ±1%: PASS, but not where the VM could not show the difference: elapsed_s under plain TCG)
    caveated = {(t["path"], t["status"]) for t in same if t["misc"]["caveat"]}
    assert caveated == {("numalab.ab.workload.elapsed_s", "DONE")}
    assert {t["status"] for t in same if not t["misc"]["caveat"]} == {"PASS"}


def test_a_malformed_field_fails_validation(written) -> None:
    """The validation is real: a test without its id, a status KCIDB does not have, a path with a space and a
    null where KCIDB wants a value are each refused."""
    breakages = [
        lambda d: d["tests"][0].pop("id"),
        lambda d: d["tests"][0].update(status="UNDECIDED"),
        lambda d: d["tests"][0].update(path="numalab.ab.work load"),
        lambda d: d["builds"][0].update(architecture=None),
    ]
    for breakage in breakages:
        bad = copy.deepcopy(written)
        breakage(bad)
        with pytest.raises(jsonschema.ValidationError):
            SCHEMA.validate_exactly(bad)


def test_paths_are_kcidb_paths() -> None:
    assert kcidb_path("numalab.ab", "workload.gbps") == "numalab.ab.workload.gbps"
    assert kcidb_path("numalab.run", "workload.my metric+x") == "numalab.run.workload.my_metric_x"


def test_a_numalab_build_s_meta_names_its_source_and_fragments(tmp_path) -> None:
    """A kernel numalab built: where its meta.json is still beside the image (the kernel cache) and is that
    image's, the checkout names the git commit and patchset, the build its fragments and compiler."""
    run = tmp_path / "run"
    shutil.copytree(PAIRS[0], run)
    build = tmp_path / "builds" / "abc123"
    build.mkdir(parents=True)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["kernel"] |= {"name": "fix", "image": str(build / "bzImage"), "sha256": "a" * 64}
    (run / "manifest.json").write_text(json.dumps(manifest))
    meta = {
        "source": {"kind": "git", "spec": "/src/linux@v6.12", "location": "https://git.kernel.org/x/linux.git",
                   "identity": "git:" + "c" * 40},
        "patches": [{"name": "0001-fix.patch", "sha256": "d" * 64}],
        "fragments": ["/repo/kernel-configs/numa.config"],
        "compiler": "gcc (Debian 12.2.0-14) 12.2.0",
        "built_at": "2026-11-20T10:00:00Z",
        "build_s": 312.5,
        "bzimage_sha256": "a" * 64,
    }  # fmt: skip
    (build / "meta.json").write_text(json.dumps(meta))
    data = _data([run])
    _validate(data)
    [checkout], [b] = data["checkouts"], data["builds"]
    assert checkout["git_commit_hash"] == "c" * 40 and checkout["git_repository_url"].startswith("https://")
    assert len(checkout["patchset_hash"]) == 64
    assert b["config_name"] == "allnoconfig+numa.config" and b["compiler"].startswith("gcc") and b["duration"] == 312.5
    ids = {checkout["id"], b["id"]}
    (build / "meta.json").write_text(json.dumps(meta | {"bzimage_sha256": "b" * 64}))  # another image's: not used
    data = _data([run])
    assert "git_commit_hash" not in data["checkouts"][0] and "compiler" not in data["builds"][0]
    assert {data["checkouts"][0]["id"], data["builds"][0]["id"]} == ids  # (ids from the records alone)


def test_a_bad_kcidb_path_is_a_one_line_error(tmp_path) -> None:
    """As --out: a path that is not one printable line, a directory, one that cannot be written or one of the
    report's own files is a one-line error naming --kcidb, and no report file is left (all are written, or none)."""
    run = str(RUNS / "ring2-idle")
    out = tmp_path / "r" / "report.html"
    blocker = tmp_path / "file"
    blocker.write_text("")
    cases = [
        (str(tmp_path / "k\nx.json"), "not one printable line"),
        (str(tmp_path), "is a directory"),
        (str(blocker / "k.json"), "cannot write"),
        (str(out.with_suffix(".json")), "the report's own files"),  # (it would replace report.json)
    ]
    for path, words in cases:
        proc = numalab("report", run, "--out", str(out), "--kcidb", path, timeout=120)
        assert_one_line_error(proc, "--kcidb", words)
        assert not out.exists()

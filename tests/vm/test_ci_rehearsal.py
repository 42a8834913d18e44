"""The CI loop, rehearsed locally: the emitted GitHub workflow's own commands, run as its jobs run them.

Each shard job runs ``SHARD_SCRIPT`` (the commands the workflow runs inside its
``debian:12`` container) in a fresh ``git clone`` of HEAD, with ``SHARD`` and
``CI`` set as on the runner; its output directory becomes the artifact
``numalab-shard-<i>``, laid out as ``download-artifact`` lays it out; the merge
job's ``run`` steps then run in another fresh clone. What this host cannot do
is left out and said: the udev step and the ``docker run`` around the script
(no container daemon here, and this host is Debian 12 already), and
``actions/cache`` (the shard uses the shared numalab cache, as a restored
cache would give it).

The matrix (``tests/data/ci-rehearsal.yaml``): ring-2, idle for a second,
numa_balancing on/off, 2 repeats: 4 runs in 2 shards of one whole A/B set
each, so the merge has a gate to judge.

The workflow is emitted as a user in another directory would: the spec by its
absolute path in this checkout, so the clones (at other paths) only work if the
emitted files name it from the repository root. The faster sibling test does
the same with a third, empty shard (no VM): the shard script and the merge
command in a clone at another path.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from common import REPO, numalab

from lab.paths import cache_root

SPEC = "tests/data/ci-rehearsal.yaml"
SHARDS = 2


def _bash(script: str, cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess:
    """A step's script as the runner runs it (``shell: bash``: bash -e -o pipefail)."""
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=timeout)  # fmt: skip


def _clone(dest: Path) -> Path:
    subprocess.run(["git", "clone", "-q", str(REPO), str(dest)], check=True, timeout=120)
    return dest


def _emit(tmp_path: Path, shards: int) -> dict:
    """The GitHub workflow for SPEC as a user would emit it: from a clone of HEAD (its own lab), in another
    directory, with the spec's absolute path. That clone is then moved away, so that no job can find the spec
    by a path of the emitting machine (the old bug on a runner: `no such file or example`)."""
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"HEAD:{SPEC}"]).returncode != 0:
        pytest.fail(f"{SPEC} is not committed: the rehearsal clones HEAD ({head.strip()})")
    emitter = _clone(tmp_path / "emitter" / "numalab")
    wf_path = tmp_path / "numalab.yml"
    elsewhere = tmp_path / "emitter-cwd"
    elsewhere.mkdir()
    proc = numalab("matrix", "ci", str(emitter / SPEC), "--github", str(wf_path), "--shards", str(shards),
                   env={"PYTHONPATH": str(emitter)}, cwd=elsewhere)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    emitter.rename(tmp_path / "emitter" / "gone")
    return yaml.safe_load(wf_path.read_text())


def _shard_script(wf: dict) -> str:
    return next(s for s in wf["jobs"]["shard"]["steps"] if "SHARD_SCRIPT" in s.get("env", {}))["env"]["SHARD_SCRIPT"]


def _runner_env() -> dict[str, str]:
    """The environment of a job's script: CI set, the shared numalab cache (as a restored cache would give it),
    and no trace of the venv running the tests."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST", "PYTHONPATH"))}
    env.update(CI="true", NUMALAB_CACHE=str(cache_root()))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p)
    return env


def test_shard_script_and_merge_from_a_clone_at_another_path(tmp_path: Path) -> None:
    """Emitted with an absolute spec path from another directory, the shard script runs in a clone at a path
    of its own (here its empty third shard: no VM, but the spec, kernels and outputs as in any shard), and the
    merge job's command merges its output there."""
    wf = _emit(tmp_path, 3)
    assert wf["jobs"]["shard"]["strategy"]["matrix"]["shard"] == [1, 2, 3]
    clone = _clone(tmp_path / "runner" / "work" / "numalab-clone")
    env = _runner_env()
    proc = _bash(_shard_script(wf), clone, {**env, "SHARD": "3"}, timeout=1200)
    assert proc.returncode == 0, f"shard 3:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "0 runs" in proc.stdout and "utilisation n/a (no run started)" in proc.stdout, proc.stdout
    out = clone / "out" / "shard-3"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"] == SPEC and summary["shard"] == [3, 3] and summary["totals"] == {"runs": 0}
    # the merge job's command, with the shard's artifact where download-artifact puts it
    shutil.copytree(out, clone / "shards" / "numalab-shard-3", symlinks=True)
    merge = next(s["run"] for s in wf["jobs"]["merge"]["steps"] if "matrix merge" in s.get("run", ""))
    proc = _bash(merge, clone, env, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # 4 runs not run: the merge says so in its exit code
    assert "merged 0 runs from 1 directories" in proc.stdout and "error" not in proc.stderr, proc.stderr
    merged = json.loads((clone / "merged" / "summary.json").read_text())
    assert merged["source"] == SPEC and merged["totals"] == {"not-run": 4, "runs": 4}


@pytest.mark.vm
def test_shards_in_fresh_clones_then_merge(tmp_path: Path) -> None:
    wf = _emit(tmp_path, SHARDS)
    shard_job, merge_job = wf["jobs"]["shard"], wf["jobs"]["merge"]
    assert shard_job["strategy"]["matrix"]["shard"] == [1, 2]
    script = _shard_script(wf)
    env = _runner_env()
    artifacts = tmp_path / "artifacts"
    timings = {}
    for shard in shard_job["strategy"]["matrix"]["shard"]:
        clone = _clone(tmp_path / f"shard-{shard}")
        t0 = time.monotonic()
        proc = _bash(script, clone, {**env, "SHARD": str(shard)}, timeout=1800)
        timings[f"shard {shard}"] = round(time.monotonic() - t0, 1)
        assert proc.returncode == 0, f"shard {shard}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        # upload-artifact (path out/shard-N) -> download-artifact (pattern numalab-shard-*, path shards)
        shutil.copytree(clone / "out" / f"shard-{shard}", artifacts / f"numalab-shard-{shard}", symlinks=True)
        assert len(list((clone / "out" / f"shard-{shard}" / "runs").glob("*/manifest.json"))) == 2

    merge = _clone(tmp_path / "merge")
    results = []
    t0 = time.monotonic()
    for step in merge_job["steps"]:
        uses = step.get("uses", "")
        if "download-artifact" in uses:
            shutil.copytree(artifacts, merge / step["with"]["path"], symlinks=True)
        elif "run" in step:
            proc = _bash(step["run"], merge, env, timeout=900)
            results.append((step.get("name", step["run"]), proc))
            if proc.returncode != 0:
                break  # later steps without if: always()/!cancelled() would not run either
    timings["merge"] = round(time.monotonic() - t0, 1)
    for name, proc in results:
        assert proc.returncode == 0, f"{name}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert "matrix merge" in results[-1][0] or "Merge" in results[-1][0]
    assert "merged 4 runs from 2 directories" in results[-1][1].stdout, results[-1][1].stdout

    out = merge / "merged"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["totals"] == {"ok": 4, "runs": 4}, summary["totals"]
    # every run keeps the time its shard measured (the merge used to write 0.0)
    shard_runs = {r["id"]: r for shard in (1, 2) for r in json.loads(
        (artifacts / f"numalab-shard-{shard}" / "summary.json").read_text())["runs"]}  # fmt: skip
    assert {r["id"]: r["wall_s"] for r in summary["runs"]} == {i: r["wall_s"] for i, r in shard_runs.items()}
    assert all(r["wall_s"] > 0 for r in summary["runs"])
    assert summary["gates_failed"] == 0
    assert [g["verdict"] for g in summary["gates"]] == ["pass"], summary["gates"]
    suite = ET.parse(out / "junit.xml").getroot()
    cases = list(suite.iter("testcase"))
    assert len(cases) == 5 and not [c for c in cases if c.find("failure") is not None]
    assert {c.get("name"): c.get("time") for c in cases[:4]} == {i: f"{r['wall_s']:.1f}" for i, r in shard_runs.items()}
    assert "gate" in (out / "index.html").read_text()
    # what the upload steps would upload
    for step in merge_job["steps"]:
        if "upload-artifact" in step.get("uses", ""):
            for p in step["with"]["path"].split():
                assert (merge / p).exists(), p
    print(f"\nrehearsal ({', '.join(f'{k} {v}s' for k, v in timings.items())}):", file=sys.stderr)
    print(results[-1][1].stdout, json.dumps(summary["gates"], indent=1), file=sys.stderr)

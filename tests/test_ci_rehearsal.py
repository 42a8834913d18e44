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


@pytest.mark.vm
def test_shards_in_fresh_clones_then_merge(tmp_path: Path) -> None:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    if subprocess.run(["git", "-C", str(REPO), "cat-file", "-e", f"HEAD:{SPEC}"]).returncode != 0:
        pytest.fail(f"{SPEC} is not committed: the rehearsal clones HEAD ({head.strip()})")
    wf_path = tmp_path / "numalab.yml"
    proc = numalab("matrix", "ci", SPEC, "--github", str(wf_path), "--shards", str(SHARDS))
    assert proc.returncode == 0, proc.stderr
    wf = yaml.safe_load(wf_path.read_text())
    shard_job, merge_job = wf["jobs"]["shard"], wf["jobs"]["merge"]
    assert shard_job["strategy"]["matrix"]["shard"] == [1, 2]
    container_step = next(s for s in shard_job["steps"] if "SHARD_SCRIPT" in s.get("env", {}))
    script = container_step["env"]["SHARD_SCRIPT"]

    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTEST"))}
    env.update(CI="true", NUMALAB_CACHE=str(cache_root()))
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if "/.venv/" not in p)
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
    assert summary["gates_failed"] == 0
    assert [g["verdict"] for g in summary["gates"]] == ["pass"], summary["gates"]
    suite = ET.parse(out / "junit.xml").getroot()
    cases = list(suite.iter("testcase"))
    assert len(cases) == 5 and not [c for c in cases if c.find("failure") is not None]
    assert "gate" in (out / "index.html").read_text()
    # what the upload steps would upload
    for step in merge_job["steps"]:
        if "upload-artifact" in step.get("uses", ""):
            for p in step["with"]["path"].split():
                assert (merge / p).exists(), p
    print(f"\nrehearsal ({', '.join(f'{k} {v}s' for k, v in timings.items())}):", file=sys.stderr)
    print(results[-1][1].stdout, json.dumps(summary["gates"], indent=1), file=sys.stderr)

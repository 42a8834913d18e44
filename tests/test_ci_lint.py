"""The emitted CI files lint clean: GitHub workflows with actionlint, zizmor and the
workflow JSON schema; GitLab pipelines by parsing and with GitLab's CI JSON schema.

zizmor and check-jsonschema (which ships both schemas) come from PyPI with the
dev extra (``make setup``); this test installs them into the venv if they are
missing. actionlint is a Go program: its PyPI wrapper downloads the binary from
GitHub at install time, so the test builds it with ``go install`` through the Go
module proxy into the numalab cache when a Go toolchain is on PATH, and skips
that one check (saying why) when none is.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from common import REPO, assert_one_line_error, numalab

from lab.matrix.ci import ACTIONS
from lab.paths import cache_dir

ACTIONLINT = "github.com/rhysd/actionlint/cmd/actionlint@v1.7.12"
BIN = Path(sys.executable).parent

# (spec, shards): one shard, a few, and a spec with kernel builds, gates and a relative patch path
CASES = [("ci-smoke", 1), ("ci-smoke", 3), ("ab-small-imbalance", 4), ("tests/data/ci-rehearsal.yaml", 2)]


def _venv_tool(name: str, package: str) -> str:
    exe = BIN / name
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", package], check=True, timeout=600)
    assert exe.exists(), f"{package} did not install {exe}"
    return str(exe)


def _actionlint() -> str:
    found = shutil.which("actionlint")
    if found:
        return found
    tools = cache_dir("tools")
    exe = tools / ("actionlint-" + ACTIONLINT.rsplit("@", 1)[1])
    if exe.exists():
        return str(exe)
    go = shutil.which("go") or ("/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None)
    if go is None:
        pytest.skip("actionlint: no Go toolchain to build it (its PyPI wrapper downloads from GitHub); "
                    "zizmor and the schema check still ran")  # fmt: skip
    gobin = tools / "gobin"
    proc = subprocess.run([go, "install", ACTIONLINT], env={**os.environ, "GOBIN": str(gobin)},
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, f"go install {ACTIONLINT} failed:\n{proc.stderr[-2000:]}"
    (gobin / "actionlint").replace(exe)
    return str(exe)


def _emit(tmp_path: Path, spec: str, shards: int) -> tuple[Path, Path]:
    gh, gl = tmp_path / ".github" / "workflows" / "numalab.yml", tmp_path / ".gitlab-ci.yml"
    proc = numalab("matrix", "ci", spec, "--github", str(gh), "--gitlab", str(gl), "--shards", str(shards))
    assert proc.returncode == 0, proc.stderr
    return gh, gl


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cwd)


@pytest.mark.parametrize(("spec", "shards"), CASES)
def test_github_workflow_passes_zizmor_and_the_schema(tmp_path: Path, spec: str, shards: int) -> None:
    gh, _ = _emit(tmp_path, spec, shards)
    zizmor = _venv_tool("zizmor", "zizmor")
    proc = _run([zizmor, "--offline", "--persona", "pedantic", "--format", "json", str(gh)])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout) == []
    check = _venv_tool("check-jsonschema", "check-jsonschema")
    proc = _run([check, "--builtin-schema", "vendor.github-workflows", str(gh)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize(("spec", "shards"), CASES)
def test_github_workflow_passes_actionlint(tmp_path: Path, spec: str, shards: int) -> None:
    gh, _ = _emit(tmp_path, spec, shards)
    (tmp_path / ".git").mkdir()  # actionlint looks for the repository root
    proc = _run([_actionlint(), "-no-color", str(gh.relative_to(tmp_path))], cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_linters_catch_what_the_issue_listed(tmp_path: Path) -> None:
    """The checks can fail: an unpinned action, a checkout that keeps its credentials and a typo are found."""
    gh, _ = _emit(tmp_path, "ci-smoke", 2)
    repo, sha, tag = ACTIONS["checkout"]
    bad = gh.read_text().replace(f"{repo}@{sha} # {tag}", f"{repo}@v4")
    bad = bad.replace("        with:\n          persist-credentials: false\n", "")
    bad = bad.replace("${{ matrix.shard }}/2", "${{ matrix.shrad }}/2")
    gh.write_text(bad)
    proc = _run([_venv_tool("zizmor", "zizmor"), "--offline", "--format", "json", str(gh)])
    found = {f["ident"] for f in json.loads(proc.stdout)}
    assert {"unpinned-uses", "artipacked"} <= found, found
    (tmp_path / ".git").mkdir()
    proc = _run([_actionlint(), "-no-color", str(gh.relative_to(tmp_path))], cwd=tmp_path)
    assert proc.returncode == 1 and "shrad" in proc.stdout, proc.stdout
    if shutil.which("shellcheck"):  # make setup installs it; actionlint then checks every run: script with it
        gh.write_text(gh.read_text().replace("          rc=0\n", "          rc=0\n          cd $HOME/x\n"))
        proc = _run([_actionlint(), "-no-color", str(gh.relative_to(tmp_path))], cwd=tmp_path)
        assert "SC2086" in proc.stdout, proc.stdout


def test_github_workflow_shape(tmp_path: Path) -> None:
    gh, _ = _emit(tmp_path, "ci-smoke", 3)
    wf = yaml.safe_load(gh.read_text())
    assert wf["permissions"] == {}
    shard, merge = wf["jobs"]["shard"], wf["jobs"]["merge"]
    assert shard["strategy"]["matrix"]["shard"] == [1, 2, 3]
    assert shard["permissions"] == {"contents": "read"}
    assert merge["permissions"] == {"contents": "read", "checks": "write"}
    steps = shard["steps"]
    # the udev step comes first, then the container with /dev/kvm
    assert "udev" in steps[0]["name"] and "kvm" in steps[0]["run"]
    run_step = next(s for s in steps if "SHARD_SCRIPT" in s.get("env", {}))
    assert "--device /dev/kvm" in run_step["run"] and "debian:12" in run_step["run"]
    script = run_step["env"]["SHARD_SCRIPT"]
    assert "make setup" in script and '--shard "$SHARD/3"' in script
    # every action is pinned to a 40-hex commit
    for job in wf["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
    # the merge job installs only the package, and nothing swallows its exit code
    runs = [s["run"] for s in merge["steps"] if "run" in s]
    assert any(".venv/bin/pip install -q -e ." in r and "[" not in r for r in runs), runs
    assert not any("make setup" in r or "libvirt" in r for r in runs), runs
    merge_step = next(s for s in merge["steps"] if "matrix merge" in s.get("run", ""))
    assert "continue-on-error" not in merge_step and "|| true" not in merge_step["run"]
    names = {s["with"]["name"] for s in merge["steps"] if "upload-artifact" in s.get("uses", "")}
    assert names == {"numalab-ci-smoke", "numalab-ci-smoke-junit", "numalab-ci-smoke-overview"}


@pytest.mark.parametrize(("spec", "shards"), CASES)
def test_gitlab_pipeline_parses_and_passes_the_schema(tmp_path: Path, spec: str, shards: int) -> None:
    _, gl = _emit(tmp_path, spec, shards)
    pipe = yaml.safe_load(gl.read_text())
    shard, merge = pipe["numalab-shard"], pipe["numalab-merge"]
    assert pipe["stages"] == ["shard", "merge"]
    assert shard.get("parallel") == (shards if shards > 1 else None)
    index = "$CI_NODE_INDEX/$CI_NODE_TOTAL" if shards > 1 else "1/1"
    assert "make setup" in shard["script"] and any(f'--shard "{index}"' in c for c in shard["script"])
    assert shard["image"] == merge["image"] == "debian:12"
    assert merge["needs"] == [{"job": "numalab-shard", "artifacts": True}] and merge["when"] == "always"
    assert merge["artifacts"]["reports"]["junit"] == "merged/junit.xml" and merge["artifacts"]["when"] == "always"
    assert not any("make setup" in c or "libvirt" in c for c in merge["script"])
    proc = _run([_venv_tool("check-jsonschema", "check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", str(gl)])
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_gitlab_schema_check_can_fail(tmp_path: Path) -> None:
    _, gl = _emit(tmp_path, "ci-smoke", 2)
    gl.write_text(gl.read_text().replace("parallel: 2", "parallel: 1000"))
    proc = _run([_venv_tool("check-jsonschema", "check-jsonschema"), "--builtin-schema", "vendor.gitlab-ci", str(gl)])
    assert proc.returncode == 1, proc.stdout


def test_gitlab_runner_tag(tmp_path: Path) -> None:
    gl = tmp_path / "gl.yml"
    assert numalab("matrix", "ci", "ci-smoke", "--gitlab", str(gl), "--gitlab-tag", "kvm").returncode == 0
    assert yaml.safe_load(gl.read_text())["numalab-shard"]["tags"] == ["kvm"]


def test_ci_bad_input_is_one_line(tmp_path: Path) -> None:
    assert_one_line_error(numalab("matrix", "ci", "ci-smoke"), "--github", "--gitlab")
    assert_one_line_error(numalab("matrix", "ci", "ci-smoke", "--gitlab", "-", "--shards", "0"), "--shards")
    assert_one_line_error(numalab("matrix", "ci", "nope.yaml", "--gitlab", str(tmp_path / "x.yml")), "nope.yaml")
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert_one_line_error(numalab("matrix", "ci", "ci-smoke", "--github", str(blocker / "wf.yml")), str(blocker))
    assert not (tmp_path / "x.yml").exists()


def test_rehearsal_spec_is_small() -> None:
    proc = numalab("matrix", "list", str(REPO / "tests/data/ci-rehearsal.yaml"), "--json")
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 4


def test_gitlab_runs_the_commands_the_rehearsal_ran(tmp_path: Path) -> None:
    """GitLab's shard script is the GitHub shard script (which tests/test_ci_rehearsal.py runs), with GitLab's
    shard variables; its merge command is the GitHub merge command on GitLab's artifact paths."""
    gh, gl = _emit(tmp_path, "tests/data/ci-rehearsal.yaml", 2)
    wf, pipe = yaml.safe_load(gh.read_text()), yaml.safe_load(gl.read_text())
    step = next(s for s in wf["jobs"]["shard"]["steps"] if "SHARD_SCRIPT" in s.get("env", {}))
    github = step["env"]["SHARD_SCRIPT"].replace('"$SHARD/2"', '"$CI_NODE_INDEX/$CI_NODE_TOTAL"')
    assert pipe["numalab-shard"]["script"] == github.replace("$SHARD", "$CI_NODE_INDEX").splitlines()
    merge = next(s["run"] for s in wf["jobs"]["merge"]["steps"] if "matrix merge" in s.get("run", ""))
    assert pipe["numalab-merge"]["script"][-1] == merge.replace("shards/*", "out/shard-*")

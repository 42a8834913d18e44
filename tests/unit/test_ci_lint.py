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
import shlex
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
    assert "make setup-runs" in script and '--shard "$SHARD/3"' in script
    # the cache is restored before the shard and saved after it even when the shard failed (actions/cache's
    # own post step saves only on success), unless the exact key was restored
    restore = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/cache/restore@"))
    save = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/cache/save@"))
    assert restore < steps.index(run_step) < save
    assert not any(s.get("uses", "").startswith("actions/cache@") for s in steps)
    cache_id = steps[restore]["id"]
    assert steps[save]["if"] == f"${{{{ always() && steps.{cache_id}.outputs.cache-hit != 'true' }}}}"
    assert steps[save]["with"] == {"path": steps[restore]["with"]["path"],
                                   "key": f"${{{{ steps.{cache_id}.outputs.cache-primary-key }}}}"}  # fmt: skip
    assert ACTIONS["cache/restore"][1:] == ACTIONS["cache/save"][1:]  # one release of actions/cache
    # every action is pinned to a 40-hex commit
    for job in wf["jobs"].values():
        for step in job["steps"]:
            if "uses" in step:
                assert re.fullmatch(r"[\w.-]+/[\w.-]+(/[\w.-]+)?@[0-9a-f]{40}", step["uses"]), step["uses"]
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
    assert "make setup-runs" in shard["script"] and any(f'--shard "{index}"' in c for c in shard["script"])
    assert shard["image"] == merge["image"] == "debian:12"
    assert merge["needs"] == [{"job": "numalab-shard", "artifacts": True}] and merge["when"] == "always"
    assert shard["cache"]["when"] == "always"  # a failing shard's kernel build is kept for the next pipeline
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
    assert numalab("matrix", "ci", "ci-smoke", "--gitlab", str(gl)).returncode == 0
    assert "tags" not in yaml.safe_load(gl.read_text())["numalab-shard"]


@pytest.mark.parametrize(
    ("tag", "needle"),
    [("", "--gitlab-tag: empty"), ("  ", "--gitlab-tag: empty"), (" kvm", "not a runner tag"),
     ("kvm,big", "not a runner tag"), ("kvm\nx", "not a runner tag")],
)  # fmt: skip
def test_gitlab_runner_tag_that_is_not_a_tag_is_refused(tmp_path: Path, tag: str, needle: str) -> None:
    """An empty tag used to drop tags: silently (the shards then went to any runner, /dev/kvm or not)."""
    gl = tmp_path / "gl.yml"
    assert_one_line_error(numalab("matrix", "ci", "ci-smoke", "--gitlab", str(gl), "--gitlab-tag", tag), needle)
    assert not gl.exists()


def test_gitlab_runner_tag_needs_gitlab(tmp_path: Path) -> None:
    gh = tmp_path / "gh.yml"
    assert_one_line_error(numalab("matrix", "ci", "ci-smoke", "--github", str(gh), "--gitlab-tag", "kvm"),
                          "--gitlab-tag: only with --gitlab")  # fmt: skip
    assert not gh.exists()


# --- the spec's path in the emitted files ---------------------------------------------------------------------


def _git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _spec_args(path: Path) -> list[str]:
    """The commands' spec arguments as the emitted files give them: shard run and merge, GitHub and GitLab."""
    gh, gl = yaml.safe_load((path / "gh.yml").read_text()), yaml.safe_load((path / "gl.yml").read_text())
    step = next(s for s in gh["jobs"]["shard"]["steps"] if "SHARD_SCRIPT" in s.get("env", {}))
    merge = next(s["run"] for s in gh["jobs"]["merge"]["steps"] if "matrix merge" in s.get("run", ""))
    cmds = [step["env"]["SHARD_SCRIPT"].splitlines()[-1], merge, gl["numalab-shard"]["script"][-1],
            gl["numalab-merge"]["script"][-1]]  # fmt: skip
    out = []
    for c in cmds:
        argv = shlex.split(c)
        out.append(argv[argv.index("run") + 1] if "run" in argv else argv[argv.index("--spec") + 1])
    return out


def test_spec_path_is_relative_to_the_repository_root(tmp_path: Path) -> None:
    """Given as an absolute path, or relative to another directory, the spec is named from the root of its
    checkout, where the CI jobs run: never by a path of the machine that emitted the files."""
    repo = tmp_path / "some" / "checkout"
    (repo / "ci" / "specs").mkdir(parents=True)
    (repo / "ci" / "specs" / "m.yaml").write_text((REPO / "tests/data/ci-rehearsal.yaml").read_text())
    _git("init", "-q", cwd=repo)
    _git("add", "ci/specs/m.yaml", cwd=repo)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {"PYTHONPATH": str(REPO)}  # this tree's lab, from another directory
    for given, cwd in [(str(repo / "ci/specs/m.yaml"), elsewhere), ("../some/checkout/ci/specs/m.yaml", elsewhere),
                       ("specs/m.yaml", repo / "ci"), ("m.yaml", repo / "ci" / "specs")]:  # fmt: skip
        proc = numalab("matrix", "ci", given, "--github", str(tmp_path / "gh.yml"), "--gitlab",
                       str(tmp_path / "gl.yml"), env=env, cwd=cwd)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stderr == "", proc.stderr  # tracked: no warning
        assert _spec_args(tmp_path) == ["ci/specs/m.yaml"] * 4, given
        for f in ("gh.yml", "gl.yml"):
            assert str(tmp_path) not in (tmp_path / f).read_text(), (given, f)
    # a symlink in the checkout that leads out of it, and a spec outside any checkout: one-line errors
    (tmp_path / "outside.yaml").write_text((REPO / "tests/data/ci-rehearsal.yaml").read_text())
    (repo / "ci" / "link.yaml").symlink_to(tmp_path / "outside.yaml")
    for given, needle in [(str(tmp_path / "outside.yaml"), "outside any git repository"),
                          (str(repo / "ci" / "link.yaml"), "outside the repository")]:  # fmt: skip
        proc = numalab("matrix", "ci", given, "--gitlab", str(tmp_path / "no.yml"), env=env, cwd=elsewhere)
        assert_one_line_error(proc, given, needle)
        assert not (tmp_path / "no.yml").exists()
    # not committed: written, with a warning that the CI checkout will not have it
    (repo / "ci" / "new.yaml").write_text((REPO / "tests/data/ci-rehearsal.yaml").read_text())
    proc = numalab("matrix", "ci", str(repo / "ci" / "new.yaml"), "--gitlab", "-", env=env, cwd=elsewhere)
    assert proc.returncode == 0 and "ci/new.yaml --shard" in proc.stdout, proc.stderr
    assert "warning" in proc.stderr and "not tracked by git" in proc.stderr
    # a path that cannot be written into YAML and shell commands as it is
    (repo / "ci" / "a#{x}.yaml").write_text((REPO / "tests/data/ci-rehearsal.yaml").read_text())
    proc = numalab("matrix", "ci", "ci/a#{x}.yaml", "--gitlab", str(tmp_path / "no.yml"), env=env, cwd=repo)
    assert_one_line_error(proc, "ci/a#{x}.yaml", "letters, digits")


def test_files_the_spec_names_must_be_found_from_the_repository_root(tmp_path: Path) -> None:
    """Topology files and bzImage paths are read relative to the current directory, which is the repository
    root in a CI job: one named otherwise (or by an absolute path), or a build recipe's absolute path, would
    be a path of the emitting machine again."""
    repo = tmp_path / "checkout"
    (repo / "ci").mkdir(parents=True)
    (repo / "ci" / "two.yaml").write_text((REPO / "topologies" / "ring-2.yaml").read_text())
    _git("init", "-q", cwd=repo)
    env = {"PYTHONPATH": str(REPO)}
    base = "workloads: [{name: idle, duration: 1}]\n"

    def emit(text: str, cwd: Path) -> subprocess.CompletedProcess:
        (repo / "ci" / "m.yaml").write_text(base + text)
        return numalab("matrix", "ci", str(repo / "ci" / "m.yaml"), "--gitlab", "-", env=env, cwd=cwd)

    proc = emit("topologies: [ci/two.yaml]\n", repo)  # from the root: the same file in CI
    assert proc.returncode == 0 and "ci/m.yaml --shard" in proc.stdout, proc.stderr
    assert_one_line_error(emit("topologies: [two.yaml]\n", repo / "ci"), "topologies: two.yaml",
                          "does not name")  # fmt: skip
    assert_one_line_error(emit(f"topologies: [{repo / 'ci' / 'two.yaml'}]\n", repo), "topologies:",
                          "absolute path of this machine")  # fmt: skip
    (tmp_path / "bzImage").write_bytes(b"x")
    assert_one_line_error(emit(f"topologies: [ring-2]\nkernels: [{tmp_path / 'bzImage'}]\n", repo), "kernels:",
                          "absolute path")  # fmt: skip
    recipe = f"topologies: [ring-2]\nkernels: [{{name: p, build: {{patches: [{tmp_path / 'x.patch'}]}}}}]\n"
    assert_one_line_error(emit(recipe, repo), "kernels: p: build.patches[0]", "path of this machine")


def test_built_in_examples_keep_their_names(tmp_path: Path) -> None:
    """By name, an example stays a name (numalab finds it in any checkout); by path, it is a path in this one."""
    env = {"PYTHONPATH": str(REPO)}
    proc = numalab("matrix", "ci", "ci-smoke", "--github", str(tmp_path / "gh.yml"), "--gitlab",
                   str(tmp_path / "gl.yml"), env=env, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _spec_args(tmp_path) == ["ci-smoke"] * 4
    proc = numalab("matrix", "ci", str(REPO / "lab/matrix/examples/ci-smoke.yaml"), "--github",
                   str(tmp_path / "gh.yml"), "--gitlab", str(tmp_path / "gl.yml"), env=env, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert _spec_args(tmp_path) == ["lab/matrix/examples/ci-smoke.yaml"] * 4


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
    """GitLab's shard script is the GitHub shard script (which tests/vm/test_ci_rehearsal.py runs), with GitLab's
    shard variables; its merge command is the GitHub merge command on GitLab's artifact paths."""
    gh, gl = _emit(tmp_path, "tests/data/ci-rehearsal.yaml", 2)
    wf, pipe = yaml.safe_load(gh.read_text()), yaml.safe_load(gl.read_text())
    step = next(s for s in wf["jobs"]["shard"]["steps"] if "SHARD_SCRIPT" in s.get("env", {}))
    github = step["env"]["SHARD_SCRIPT"].replace('"$SHARD/2"', '"$CI_NODE_INDEX/$CI_NODE_TOTAL"')
    assert pipe["numalab-shard"]["script"] == github.replace("$SHARD", "$CI_NODE_INDEX").splitlines()
    merge = next(s["run"] for s in wf["jobs"]["merge"]["steps"] if "matrix merge" in s.get("run", ""))
    assert pipe["numalab-merge"]["script"][-1] == merge.replace("shards/*", "out/shard-*")


def test_a_matrix_on_qemu10_fetches_it_in_the_shard(tmp_path: Path) -> None:
    """A setting with qemu: backports makes the shards run make setup-qemu10 too (GitHub and GitLab)."""
    from lab.matrix.ci import needs_qemu10, shard_commands
    from lab.matrix.definition import parse_matrix

    settings = [{"name": "q72"}, {"name": "q10", "qemu": "backports"}]
    spec = parse_matrix({"topologies": ["ring-2"], "workloads": ["idle"], "settings": settings}, "x", "qemus")
    assert needs_qemu10(spec) and not needs_qemu10(parse_matrix({"topologies": ["ring-2"], "workloads": ["idle"]},
                                                               "y", "plain"))  # fmt: skip
    assert "make setup-runs setup-qemu10" in shard_commands("m.yaml", "1", "2", "out", True)
    assert "make setup-runs" in shard_commands("m.yaml", "1", "2", "out") and not any(
        "qemu10" in c for c in shard_commands("m.yaml", "1", "2", "out")
    )

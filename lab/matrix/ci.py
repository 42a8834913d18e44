"""A GitHub Actions workflow that runs a matrix in shards and merges the results.

What a GitHub-hosted runner does with it (``ubuntu-latest``, which has ``/dev/kvm``):

* shard jobs: a udev rule opens ``/dev/kvm`` to the runner user, then the
  shard runs in a ``debian:12`` container with ``/dev/kvm`` passed in, so the
  same setup as on a developer's Debian 12 machine works (``make setup-runs``:
  ``make setup`` without the suite's and the docs' tools; Debian package names,
  ``linux-source-6.1``, ``apt-get download`` of the stock kernel); numalab's
  own probe picks KVM there, or falls back to TCG;
* the merge job needs only Python: the numalab package without extras, the
  shard artifacts, ``numalab matrix merge`` (whose exit code carries the
  gates: a failing gate or a run that is not ok fails the workflow), and
  JUnit plus the HTML overview uploaded as artifacts and published as a check;
* the cache (``.numalab-cache``: the stock kernel, kernel builds) is restored
  before the shard and saved after it even when the shard failed (a failing
  run must not cost the next pipeline its kernel build), unless the exact key
  was restored;
* least privilege: ``permissions: {}`` at the top, ``contents: read`` for the
  jobs, ``checks: write`` only where the JUnit check is published; every
  action pinned to the commit of a release tag; checkout keeps no credentials.

Every job runs at the root of its checkout, so the files name the spec from
there (:func:`ci_spec_path`): relative to the top level of the spec's git
checkout, whatever path or directory it was emitted with, or a built-in
example by its name.

The commands inside the container are ``SHARD_SCRIPT`` (an ``env`` entry of
the shard step): ``tests/vm/test_ci_rehearsal.py`` runs exactly those, and the
merge job's ``run`` steps, in fresh clones.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import yaml

from lab.errors import LabError
from lab.matrix.definition import MatrixSpec, example_path
from lab.vm.qemu.emulator import BACKPORTS

# (action, commit of the release tag, tag): read from the actions' own repositories
# (``git rev-parse TAG^{commit}``); update all three together (cache/restore and cache/save with each other).
ACTIONS = {
    "checkout": ("actions/checkout", "3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "cache/restore": ("actions/cache/restore", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "cache/save": ("actions/cache/save", "27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "upload-artifact": ("actions/upload-artifact", "bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "download-artifact": ("actions/download-artifact", "3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "junit-report": ("mikepenz/action-junit-report", "d9f48fc87bc235f7e214acf696ca5abc0a986f16", "v6.4.2"),
}

CONTAINER_IMAGE = "debian:12"
# Inside the container (root, Debian 12): make is all ``make setup-runs`` needs to start. In a container
# (/.dockerenv), a policy-rc.d keeps package scripts from starting services (libvirtd) without an
# init, as Docker's own Debian images for builds do; on a host it is left alone.
BOOTSTRAP = (
    "if [ -f /.dockerenv ]; then printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && "
    "chmod +x /usr/sbin/policy-rc.d; fi; "
    "command -v make > /dev/null || "
    "{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends make; }"
)
# The merge job, on the runner itself: the numalab package alone (no libvirt extra, no Debian packages but
# python3-venv if the runner's Python lacks it).
MERGE_SETUP = [
    "python3 -c 'import ensurepip, venv' 2> /dev/null || "
    "{ sudo apt-get update -q && sudo apt-get install -y -q --no-install-recommends python3-venv; }",
    "python3 -m venv .venv",
    ".venv/bin/pip install -q -e .",
]


# What a spec path in the emitted files may hold: it goes into shell commands, YAML scalars and comments,
# and GitHub expands ``${{ }}`` anywhere in a workflow.
_SAFE_PATH = re.compile(r"[A-Za-z0-9_.+@/ -]+")


def ci_spec_path(given: str, spec: MatrixSpec) -> tuple[str, bool]:
    """How the CI jobs name the spec, and whether git tracks it: a built-in example's name as given, or the
    spec's path relative to the top level of its git checkout (the jobs run at the root of their checkout).
    A spec outside a git checkout, one whose path could not be written safely, or one naming files the jobs
    would not find (:func:`check_references`) is a one-line error."""
    source = Path(spec.source)
    if "/" not in given and (ex := example_path(given)) is not None and ex.resolve() == source.resolve():
        return given, True
    real = source.resolve()
    try:  # the checkout the spec is named in (a symlink in it must lead to a file in it, checked below)
        proc = subprocess.run(["git", "-C", str(source.absolute().parent), "rev-parse", "--show-toplevel"],
                              capture_output=True, text=True)  # fmt: skip
    except OSError as err:
        raise LabError(f"{given}: cannot ask git for the repository root: {err.strerror or err}") from None
    if proc.returncode != 0:
        why = (proc.stderr.strip().splitlines() or ["git said nothing"])[-1].removeprefix("fatal: ")
        where = "outside any git repository" if "not a git repository" in why else f"git: {why}"
        raise LabError(f"{given}: {where}: the CI jobs read the spec from their checkout of the repository, "
                       "so it must be in the repository the CI file is for")  # fmt: skip
    top = Path(proc.stdout.strip()).resolve()
    if not real.is_relative_to(top):  # a symlink out of the checkout
        raise LabError(f"{given}: resolves to {real}, outside the repository {top}: the CI checkout would not have it")
    rel = real.relative_to(top).as_posix()
    if not _SAFE_PATH.fullmatch(rel) or rel.startswith("-"):
        raise LabError(f"{given}: its path in the repository ({rel!r}) may hold only ASCII letters, digits, spaces "
                       "and _ . + @ / - (not - first): it is written into shell commands and YAML")  # fmt: skip
    check_references(spec, top)
    tracked = subprocess.run(["git", "-C", str(top), "ls-files", "--error-unmatch", "--", rel],
                             capture_output=True).returncode == 0  # fmt: skip
    return rel, tracked


def check_references(spec: MatrixSpec, top: Path) -> None:
    """The files a spec names must be found by the CI jobs too, which run at the repository root ``top``:
    topology files and bzImage paths are read relative to the current directory, so each must name, from
    ``top``, the file it names here (and lie in the repository); a build recipe's files are read relative to
    the spec's directory, so none may be an absolute path of this machine."""
    here = Path.cwd()
    files = [(f"topologies: {t.name}", t.name) for t in dict.fromkeys(r.topology for r in spec.runs)
             if "/" in t.name or t.name.endswith((".yaml", ".yml"))]  # fmt: skip
    files += [(f"kernels: {k.name}", k.spec) for k in spec.kernels
              if k.build is None and k.spec != "stock" and ("/" in k.spec or Path(k.spec).exists())]  # fmt: skip
    for field, name in files:
        found, in_ci = (here / name).resolve(), (top / name).resolve()
        if Path(name).is_absolute():
            why = "an absolute path of this machine"
        elif found != in_ci or not in_ci.is_relative_to(top):
            why = f"read from the repository root ({top}) where the CI jobs run, it does not name {found}"
        else:
            continue
        raise LabError(f"{spec.source}: {field}: {why}: give it relative to the repository root, inside it")
    for k in spec.kernels:
        if k.build is None:
            continue
        paths = [("source", k.build.get("source")), ("series", k.build.get("series"))]
        paths += [(f"{key}[{i}]", p) for key in ("patches", "fragments") for i, p in enumerate(k.build.get(key) or [])]
        for key, p in paths:
            if isinstance(p, str) and p.startswith(("/", "~")):
                raise LabError(f"{spec.source}: kernels: {k.name}: build.{key}: {p} is a path of this machine, "
                               "which the CI jobs do not have: put the file in the repository and give it "
                               "relative to the spec's directory")  # fmt: skip


def needs_qemu10(spec: MatrixSpec) -> bool:
    """Whether a setting of the matrix runs on the backports QEMU (numalab run --qemu backports)."""
    return any(s.qemu == BACKPORTS for s in {r.setting for r in spec.runs})


def shard_commands(spec_path: str, shard: str, total: str, out: str, qemu10: bool = False) -> list[str]:
    """The shard's commands on a Debian 12 machine (as root): shared by GitHub and GitLab. ``qemu10``: fetch
    QEMU 10 from Debian's backports too (make setup-qemu10), for a matrix with a ``qemu: backports`` setting."""
    return [
        BOOTSTRAP,
        "make setup-runs setup-qemu10" if qemu10 else "make setup-runs",
        f'.venv/bin/numalab matrix run {shlex.quote(spec_path)} --shard "{shard}/{total}" --out "{out}"',
    ]


def merge_command(spec_path: str, dirs: str) -> str:
    return f".venv/bin/numalab matrix merge {dirs} --spec {shlex.quote(spec_path)} --out merged"


class Flow(list):
    """A list the CI file shows on one line (``[a, b]``)."""


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, with a multi-line string as a literal block (``|``), :class:`Flow` lists on one
    line, and a list indented under its key (as GitHub's and GitLab's documentation write them)."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        return super().increase_indent(flow, False)


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)
_Dumper.add_representer(type(None), lambda dumper, _: dumper.represent_scalar("tag:yaml.org,2002:null", ""))
_Dumper.add_representer(
    Flow, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value, flow_style=True)
)


def ci_yaml(header: str, data: dict) -> str:
    """``data`` as YAML (yaml.safe_dump's dumper, keys in the order given), after the ``header`` comment lines;
    each ``uses:`` of an action pinned to a commit gets its release tag as a comment, and a permission why
    it is asked for (COMMENTS)."""
    # (width: a long shell line stays one line, not folded over several)
    text = yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=100_000, allow_unicode=False)
    for repo, sha, tag in ACTIONS.values():
        text = text.replace(f"uses: {repo}@{sha}\n", f"uses: {repo}@{sha} # {tag}\n")
    for line, why in COMMENTS.items():
        text = text.replace(f" {line}\n", f" {line}  # {why}\n")
    return "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines()) + text


def uses_of(action: str) -> str:
    repo, sha, _tag = ACTIONS[action]
    return f"{repo}@{sha}"


def _lines(lines: list[str]) -> str:
    """Shell lines as one ``run:``/script block."""
    return "".join(line + "\n" for line in lines)


READ = {"contents": "read"}
COMMENTS = {
    "contents: read": "to check out the repository",
    "checks: write": "to publish the JUnit report as a check run",
}
KVM_RULE = _lines(
    [
        "if [ -e /dev/kvm ]; then",
        '  echo \'KERNEL=="kvm", GROUP="kvm", MODE="0666", OPTIONS+="static_node=kvm"\' \\',
        "    | sudo tee /etc/udev/rules.d/99-kvm4all.rules > /dev/null",
        "  sudo udevadm control --reload-rules",
        "  sudo udevadm trigger --name-match=kvm",
        "  ls -l /dev/kvm",
        "else",
        '  echo "::warning::no /dev/kvm on this runner: the VMs will run under TCG"',
        "fi",
    ]
)
DOCKER_RUN = _lines(
    [
        "kvm=()",
        "if [ -e /dev/kvm ]; then kvm=(--device /dev/kvm); fi",
        "rc=0",
        'docker run --rm "${kvm[@]}" --volume "$GITHUB_WORKSPACE:/work" --workdir /work \\',
        "  --env SHARD --env SHARD_SCRIPT --env CI --env NUMALAB_CACHE=/work/.numalab-cache \\",
        f'  {CONTAINER_IMAGE} bash -euo pipefail -c "$SHARD_SCRIPT" || rc=$?',
        'sudo chown -R "$(id -u):$(id -g)" "$GITHUB_WORKSPACE"',
        'exit "$rc"',
    ]
)
NOT_CANCELLED = "${{ !cancelled() }}"


def github_workflow(spec: MatrixSpec, spec_path: str, shards: int) -> str:
    """The GitHub Actions workflow: a shard job per part of the matrix, then the merge and its gates."""
    header = f"""Generated by `numalab matrix ci --github` from {spec_path} ({len(spec.runs)} runs, {shards} shards).
Each shard job runs its part of the matrix in a debian:12 container with /dev/kvm
passed in; the merge job joins the results, writes junit.xml/summary.json/index.html
and applies the gates (a failing gate fails the workflow)."""
    return ci_yaml(header, {
        "name": f"numalab {spec.name}",
        "on": {"workflow_dispatch": None, "pull_request": None},
        "permissions": {},
        "concurrency": {"group": "numalab-${{ github.workflow }}-${{ github.ref }}", "cancel-in-progress": True},
        "defaults": {"run": {"shell": "bash"}},
        "jobs": {"shard": _github_shard_job(spec, spec_path, shards), "merge": _github_merge_job(spec, spec_path)},
    })  # fmt: skip


def _github_shard_job(spec: MatrixSpec, spec_path: str, shards: int) -> dict:
    script = shard_commands(spec_path, "$SHARD", str(shards), "out/shard-$SHARD", needs_qemu10(spec))
    cache_key = f"numalab-{CONTAINER_IMAGE.replace(':', '-')}-"
    return {
        "name": f"shard ${{{{ matrix.shard }}}}/{shards}",
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 90,
        "permissions": READ,
        "strategy": {"fail-fast": False, "matrix": {"shard": Flow(range(1, shards + 1))}},
        "steps": [
            {"name": "Open /dev/kvm to the runner user (udev rule)", "run": KVM_RULE},
            {"uses": uses_of("checkout"), "with": {"persist-credentials": False}},
            {"uses": uses_of("cache/restore"), "id": "cache", "with": {
                "path": ".numalab-cache",
                "key": cache_key + "${{ hashFiles('Makefile', 'kernel-configs/**') }}",
                "restore-keys": cache_key}},
            {"name": f"Run shard ${{{{ matrix.shard }}}}/{shards} in {CONTAINER_IMAGE}",
             "env": {"SHARD": "${{ matrix.shard }}", "SHARD_SCRIPT": _lines(script)},
             "run": DOCKER_RUN},
            {"uses": uses_of("cache/save"), "if": "${{ always() && steps.cache.outputs.cache-hit != 'true' }}",
             "with": {"path": ".numalab-cache", "key": "${{ steps.cache.outputs.cache-primary-key }}"}},
            {"uses": uses_of("upload-artifact"), "if": NOT_CANCELLED, "with": {
                "name": "numalab-shard-${{ matrix.shard }}", "path": "out/shard-${{ matrix.shard }}",
                "if-no-files-found": "warn"}},
        ],
    }  # fmt: skip


def _github_merge_job(spec: MatrixSpec, spec_path: str) -> dict:
    def upload(name: str, path: str) -> dict:
        return {"uses": uses_of("upload-artifact"), "if": NOT_CANCELLED, "with": {"name": name, "path": path}}

    return {
        "name": "merge and gate",
        "needs": "shard",
        "if": NOT_CANCELLED,
        "runs-on": "ubuntu-latest",
        "timeout-minutes": 15,
        "permissions": {**READ, "checks": "write"},
        "steps": [
            {"uses": uses_of("checkout"), "with": {"persist-credentials": False}},
            {"name": "Set up numalab (the package only)", "run": _lines(MERGE_SETUP)},
            {"uses": uses_of("download-artifact"), "with": {"pattern": "numalab-shard-*", "path": "shards"}},
            {"name": "Merge the shards and apply the gates", "run": merge_command(spec_path, "shards/*")},
            upload(f"numalab-{spec.name}", "merged"),
            upload(f"numalab-{spec.name}-junit", "merged/junit.xml"),
            upload(f"numalab-{spec.name}-overview", _lines(["merged/index.html", "merged/summary.json"])),
            {"name": "Publish JUnit", "if": NOT_CANCELLED, "uses": uses_of("junit-report"),
             "with": {"report_paths": "merged/junit.xml"}},
        ],
    }  # fmt: skip

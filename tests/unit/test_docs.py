"""The documentation: README.md, the mkdocs site in docs/, the man page and the shell completions.

No VM. The site builds with ``mkdocs build --strict`` (no broken link or anchor, every page in the
nav), and every ``numalab`` command the docs mark runnable runs (see docs/cli.md, "Documented commands
are tested"), so the docs cannot drift from the CLI.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from common import REPO

DOCS = REPO / "docs"
SCRIPTS = REPO / "docs" / "tools"
# A runnable block: the marker comment on the line before a ```console fence.
RUNNABLE = re.compile(r"^<!-- runnable(?: exit=(\d+))? -->\n```console\n(.*?)^```", re.M | re.S)
# What a runnable command's scratch directory sees of the repository.
SHARED = ("tests", "topologies", "lab", "kernel-configs")


@dataclass(frozen=True)
class Command:
    where: str  # page:line
    line: str  # what follows "$ "
    expect: tuple[str, ...]  # output lines that must appear ("..." skips)
    exit: int
    before: tuple[str, ...] = ()  # the block's earlier commands, which may make the files this one reads


def documented_commands() -> list[Command]:
    out = []
    for page in sorted(DOCS.rglob("*.md")):
        text = page.read_text()
        for m in RUNNABLE.finditer(text):
            first = text.count("\n", 0, m.start(2)) + 1
            cmd: list = []
            earlier: list[str] = []
            for i, line in enumerate(m.group(2).splitlines()):
                if line.startswith("$ "):
                    if cmd:
                        out.append(Command(*cmd))
                    cmd = [f"{page.relative_to(REPO)}:{first + i}", line[2:], (), int(m.group(1) or 0), tuple(earlier)]
                    earlier.append(line[2:])
                elif cmd:
                    cmd[2] = (*cmd[2], line)
                else:
                    raise AssertionError(f"{page.name}:{first + i}: output before any '$ ' command")
            if cmd:
                out.append(Command(*cmd))
    return out


COMMANDS = documented_commands()


def _norm(s: str) -> str:
    return " ".join(s.split())


def test_the_docs_mark_commands_runnable() -> None:
    assert len(COMMANDS) >= 10, [c.where for c in COMMANDS]
    assert all(c.line.startswith("numalab ") for c in COMMANDS), [c.line for c in COMMANDS]
    pages = {c.where.split(":")[0] for c in COMMANDS}
    for page in ("topologies.md", "reports.md", "matrix.md", "getting-started.md"):
        assert f"docs/{page}" in pages


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A directory of the test's own that sees the repository's data, where documented commands may write files
    (each command's: under xdist a block's commands may run on different workers)."""
    for name in SHARED:
        (tmp_path / name).symlink_to(REPO / name)
    return tmp_path


@pytest.mark.parametrize("cmd", COMMANDS, ids=[c.where for c in COMMANDS])
def test_documented_command_runs(cmd: Command, scratch: Path) -> None:
    env = os.environ | {"PYTHONPATH": str(REPO), "NUMALAB_PY": sys.executable}
    # the block's earlier commands first, quietly (each is tested as itself): they make the files this one reads
    setup = "".join(f"{line} >/dev/null 2>&1\n" for line in cmd.before)
    script = f'numalab() {{ "$NUMALAB_PY" -m lab.cli "$@"; }}\n{setup}{cmd.line}\n'
    proc = subprocess.run(["bash", "-c", script], cwd=scratch, env=env, capture_output=True, text=True, timeout=120)
    said = proc.stdout + proc.stderr
    assert proc.returncode == cmd.exit, f"{cmd.where}: `{cmd.line}` exited {proc.returncode}:\n{said[-2000:]}"
    lines = [_norm(x) for x in said.splitlines()]
    for want in cmd.expect:
        if want.strip() in ("", "..."):
            continue
        assert any(_norm(want) in got for got in lines), f"{cmd.where}: `{cmd.line}` did not print: {want}"


def test_mkdocs_builds_strictly(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The hook's generated table and the included preset table are in the pages.
    record = (tmp_path / "site/run-record/index.html").read_text()
    assert "<code>kernel-notes.bin</code>" in record and "<code>guest_share</code>" in record
    assert "seed000-4node" in (tmp_path / "site/topologies/index.html").read_text()


def test_the_python_api_page_names_what_exists() -> None:
    """Every ``from lab... import ...`` in docs/python.md and docs/architecture.md imports (a renamed or moved
    entry point fails here, not in a user's script)."""
    lines = [line for page in ("python.md", "architecture.md") for line in (DOCS / page).read_text().splitlines()]
    imports = sorted({line for line in lines if re.match(r"from lab[.\w]* import ", line)})
    assert len(imports) > 15
    proc = subprocess.run([sys.executable, "-c", "\n".join(imports)], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr


# Where the tree names its own files and modules: the code and its comments, the guest image, the docs, the tests
# and the build. Not the CHANGELOG (it keeps the names things had, as history), not tests/data (data), not a .patch
# (another project's diff, with that project's paths).
NAMING = ("lab", "images", "docs", "tests", "kernel-configs", "topologies", "Makefile", "README.md", "mkdocs.yml")
TEXT = {".py", ".md", ".c", ".h", ".sh", ".yaml", ".yml", ".json", ".txt", ".toml", ".config", ".xml", ""}
# A repository path with a file's extension (a prefix such as seed004-*.patch, or a folder, is not checked).
NAMED_PATH = re.compile(
    r"(?<![\w./~$-])((?:lab|images|docs|tests|kernel-configs|topologies)/[\w./+-]*\.(?:py|md|c|h|sh|yaml|json|patch|config|txt|xml))\b"
)
NAMED_MODULE = re.compile(r"(?<![\w./-])(lab(?:\.[A-Za-z_]\w*)+)")
# Names that stand for others (lab/workloads/NAME/scale.py, seedNNN), and tests/unit/test_layers.py's made-up modules.
NOT_NAMES = re.compile(r"NAME|NNN")
MADE_UP = {"lab.vm.a", "lab.report.b"}
# Names a file keeps after they moved, because changing the file costs more than the stale name: a kernel fragment's
# text, comments included, is the kernel build cache's key, so a comment's edit rebuilds every kernel once.
KEPT = {
    ("kernel-configs/base.config", "lab.vm.status"),  # lab.run.status
    ("tests/unit/test_docs.py", "lab.vm.status"),
    ("kernel-configs/tiering.config", "lab/topology/tiers.py"),  # lab/topology/model/tiers.py
    ("tests/unit/test_docs.py", "lab/topology/tiers.py"),
}


def _naming_files() -> list[Path]:
    out = []
    for top in NAMING:
        root = REPO / top
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            parts = path.relative_to(REPO).parts
            if (path.is_file() and path.suffix in TEXT and parts[:2] != ("tests", "data")
                    and not {"__pycache__", "build", ".hypothesis"} & set(parts)):  # fmt: skip
                out.append(path)
    return out


def _module_names_it(name: str) -> bool:
    """Whether ``lab.a.b.c`` is a module or package of the tree, or a name in the deepest module it starts with."""
    parts = name.split(".")
    for k in range(len(parts), 0, -1):
        base = REPO.joinpath(*parts[:k])
        module = base.with_suffix(".py")
        if module.is_file() or base.is_dir():
            if k == len(parts):
                return True
            source = module if module.is_file() else base / "__init__.py"
            return source.is_file() and re.search(rf"\b{parts[k]}\b", source.read_text()) is not None
    return False


def test_the_tree_names_only_files_and_modules_that_exist() -> None:
    """A comment, docstring or page that names a repository file (under lab/, images/, docs/, tests/,
    kernel-configs/ or topologies/, with its extension) or a module (``lab.topology.model.spec``, or a name in one:
    ``lab.run.options.RunOptions``) names one that exists: a file renamed or moved fails here, not in a reader's
    search."""
    files = _naming_files()
    assert len(files) > 300 and REPO / "images" / "guest" / "init" in files
    missing = []
    for path in files:
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            where = f"{path.relative_to(REPO)}:{n}"
            for m in NAMED_PATH.finditer(line):
                kept = (str(path.relative_to(REPO)), m.group(1)) in KEPT
                if not NOT_NAMES.search(m.group(1)) and not kept and not (REPO / m.group(1)).exists():
                    missing.append(f"{where}: {m.group(1)}")
            for m in NAMED_MODULE.finditer(line):
                kept = (str(path.relative_to(REPO)), m.group(1)) in KEPT
                if m.group(1) not in MADE_UP and not kept and not _module_names_it(m.group(1)):
                    missing.append(f"{where}: {m.group(1)}")
    assert not missing, "\n".join(missing)


def test_readme_is_short_and_starts_with_the_two_commands() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 160, len(lines)
    first_screen = "\n".join(lines[:45])
    assert "make demo" in first_screen and "make test" in first_screen
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", "\n".join(lines)):
        if "://" not in target:
            assert (REPO / target).exists(), f"README links to {target}, which does not exist"


def test_the_readme_picture_is_what_the_report_code_draws(tmp_path: Path) -> None:
    out = tmp_path / "fig.svg"
    subprocess.run(
        [sys.executable, str(SCRIPTS / "docs_figure.py"), "tests/data/runs/ring4-numa01-on-1", str(out)],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        check=True,
        timeout=60,
    )
    committed = DOCS / "img" / "ring-4-topology.svg"
    assert out.read_text() == committed.read_text(), (
        f"{committed} is stale: python docs/tools/docs_figure.py tests/data/runs/ring4-numa01-on-1 {committed}"
    )


def _cli_docs(kind: str, out: Path) -> None:
    subprocess.run(
        [sys.executable, str(SCRIPTS / "cli_docs.py"), kind, str(out)],
        cwd=REPO,
        env=os.environ | {"PYTHONPATH": str(REPO)},
        check=True,
        capture_output=True,
        timeout=60,
    )


def _subcommands() -> list[str]:
    sys.path.insert(0, str(SCRIPTS))
    try:
        import cli_docs
    finally:
        sys.path.remove(str(SCRIPTS))
    return list(cli_docs.subcommands(cli_docs.public_parser()))


def test_man_page_names_every_subcommand(tmp_path: Path) -> None:
    _cli_docs("man", tmp_path)
    page = (tmp_path / "numalab.1").read_text().replace("\\-", "-")
    assert page.startswith(".TH NUMALAB")
    paths = _subcommands()
    assert "topo show" in paths and "matrix run" in paths and "run-options" not in paths
    for path in paths:
        assert f'.SS "numalab {path}"' in page, path
    assert "run-options" not in page
    # sections written for people, in man-pages(7)'s order
    sections = [ln.removeprefix(".SH ").strip('"') for ln in page.splitlines() if ln.startswith(".SH ")]
    assert sections == ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "COMMANDS", "EXAMPLES", "EXIT STATUS",
                        "ENVIRONMENT", "FILES", "SEE ALSO"]  # fmt: skip
    env = page.split(".SH ENVIRONMENT", 1)[1].split(".SH FILES", 1)[0]
    read = set(re.findall(r"NUMALAB_[A-Z_]+", " ".join(p.read_text() for p in (REPO / "lab").rglob("*.py"))))
    read -= {"NUMALAB_RESULT"}  # (the guest's result line, not a variable)
    assert read and all(f"\n.B {name}\n" in env for name in read), read


def _bash_complete(script: Path, words: list[str], env: dict | None = None) -> set[str]:
    line = " ".join(words)
    bash = (
        f"source {script}\nCOMP_WORDS=({' '.join(words)} '')\nCOMP_CWORD={len(words)}\n"
        f"COMP_LINE='{line} '\nCOMP_POINT=${{#COMP_LINE}}\n_shtab_numalab\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n"
    )
    proc = subprocess.run(["bash", "-c", bash], capture_output=True, text=True, timeout=30, check=True,
                          cwd=script.parent, env=os.environ | (env or {}))  # fmt: skip
    return set(proc.stdout.split())


def test_completions_offer_every_subcommand(tmp_path: Path) -> None:
    _cli_docs("completions", tmp_path)
    bash, zsh = tmp_path / "numalab.bash", tmp_path / "_numalab"
    paths = _subcommands()
    top = {p for p in paths if " " not in p}
    assert _bash_complete(bash, ["numalab"]) == top
    for group in {p.split()[0] for p in paths if " " in p}:
        assert _bash_complete(bash, ["numalab", group]) == {p.split()[1] for p in paths if p.startswith(f"{group} ")}
    # names as well as fixed choices: presets, workloads, seeds, and built kernels read from the cache
    assert {"ring-4", "mesh-4", "tiered-1s-far"} <= _bash_complete(bash, ["numalab", "topo", "show"])
    assert {"ring-2", "grid-2x4"} <= _bash_complete(bash, ["numalab", "run", "--topology"])
    assert {"numa01", "pairs", "idle"} <= _bash_complete(bash, ["numalab", "run", "--workload"])
    assert {"numa01", "idle"} <= _bash_complete(bash, ["numalab", "workload", "show"])
    assert {"000", "003", "004"} <= _bash_complete(bash, ["numalab", "reproduce"])
    built = tmp_path / "cache" / "kernels" / "built"
    built.mkdir(parents=True)
    (built / "my-fix").symlink_to("../builds/0123")
    assert {"stock", "my-fix"} <= _bash_complete(
        bash, ["numalab", "run", "--kernel"], {"NUMALAB_CACHE": str(built.parents[1])}
    )
    text = zsh.read_text()
    assert text.startswith("#compdef numalab")
    for name in ("_numalab_topologies", "_numalab_workloads", "_numalab_seeds", "_numalab_kernels"):
        assert f"{name}() {{" in text and f":{name}" in text, name
    if shutil.which("zsh"):  # (not a dependency: where it is installed, the script must at least parse)
        subprocess.run(["zsh", "-n", str(zsh)], check=True, timeout=30)
    for path in paths:
        assert path.split()[-1] in text, path
    assert "run-options" not in text and "run-options" not in bash.read_text()

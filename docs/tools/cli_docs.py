"""Shell completions (bash, zsh) and a man page, generated from numalab's own argparse parser.

    python docs/tools/cli_docs.py completions OUT_DIR   # OUT_DIR/numalab.bash, OUT_DIR/_numalab
    python docs/tools/cli_docs.py man OUT_DIR           # OUT_DIR/numalab.1

shtab turns the parser into completion scripts and argparse-manpage into a man page (both from PyPI,
in the dev extra), so neither can drift from the CLI. Each file is written whole or not at all.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from lab import __version__
from lab.cli.main import build_parser

# Internal commands that are not for people: left out of completions and the man page.
HIDDEN = {"run-options"}


def public_parser() -> argparse.ArgumentParser:
    """The CLI's parser without its internal subcommands."""
    parser = build_parser()
    for action in parser._subparsers._group_actions if parser._subparsers else []:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name in HIDDEN:
                action.choices.pop(name, None)
            action._choices_actions = [a for a in action._choices_actions if a.dest not in HIDDEN]  # noqa: SLF001
    return parser


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every subcommand path ('topo show', 'matrix run', ...) and its parser."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, prefix: str) -> None:
        for action in p._actions:  # noqa: SLF001
            if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
                for name, sp in action.choices.items():
                    path = f"{prefix} {name}".strip()
                    out[path] = sp
                    walk(sp, path)

    walk(parser, "")
    return out


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def completions(out_dir: Path) -> list[Path]:
    import shtab

    paths = []
    for shell, name in (("bash", "numalab.bash"), ("zsh", "_numalab")):
        _write(out_dir / name, shtab.complete(public_parser(), shell=shell))
        paths.append(out_dir / name)
    return paths


def man(out_dir: Path) -> list[Path]:
    from argparse_manpage.manpage import Manpage

    page = Manpage(
        public_parser(),
        _data={
            "project_name": "numalab",
            "version": __version__,
            "manual_title": "numalab manual",
            "description": "QEMU/KVM lab for Linux NUMA-balancing and topology work",
            "date": "",
        },
    )
    text = str(page)
    text += (
        '.SH "SEE ALSO"\nThe documentation site (make docs, then site/index.html) and README.md.\n'
        "Every command has --help.\n"
    )
    _write(out_dir / "numalab.1", text)
    return [out_dir / "numalab.1"]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("completions", "man"):
        print("usage: cli_docs.py completions|man OUT_DIR", file=sys.stderr)
        return 2
    for path in (completions if argv[0] == "completions" else man)(Path(argv[1])):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The ``numalab`` command: each command group adds its own parser (``lab.cli.cmd_*``); main runs one."""

from __future__ import annotations

import argparse
import sys

import lab.cli.cmd_ab as cmd_ab
import lab.cli.cmd_bisect as cmd_bisect
import lab.cli.cmd_compare as cmd_compare
import lab.cli.cmd_doctor as cmd_doctor
import lab.cli.cmd_kernel as cmd_kernel
import lab.cli.cmd_matrix as cmd_matrix
import lab.cli.cmd_nested as cmd_nested
import lab.cli.cmd_report as cmd_report
import lab.cli.cmd_reproduce as cmd_reproduce
import lab.cli.cmd_run as cmd_run
import lab.cli.cmd_scheduler as cmd_scheduler
import lab.cli.cmd_topo as cmd_topo
import lab.cli.cmd_workload as cmd_workload
from lab import __version__
from lab.cli.cmd_run import run_options_from_args
from lab.cli.common import Parser, error, setup_logging
from lab.cli.shared_options import verbosity_options
from lab.errors import LabError

__all__ = ["build_parser", "main", "run_options_from_args"]

# In the order ``numalab --help`` lists them.
COMMANDS = (
    cmd_topo,
    cmd_workload,
    cmd_doctor,
    cmd_nested,
    cmd_run,
    cmd_ab,
    cmd_matrix,
    cmd_kernel,
    cmd_scheduler,
    cmd_bisect,
    cmd_reproduce,
    cmd_report,
    cmd_compare,
)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="numalab",
        description="QEMU/KVM lab for Linux NUMA-balancing and topology work: emulated NUMA machines, "
        "patched kernels, traced workloads.",
    )
    p.add_argument("--version", action="version", version=f"numalab {__version__}")
    verbosity_options(p, top=True)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    for parser in _leaves(p):  # -q/-v after the command too: numalab run -q ..., numalab kernel build -v ...
        verbosity_options(parser, top=False)
    return p


def _leaves(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers that run a command (those without subcommands of their own)."""
    subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]  # noqa: SLF001
    if not subs:
        return [p]
    return [leaf for a in subs for sp in dict.fromkeys(a.choices.values()) for leaf in _leaves(sp)]


def verbosity(args: argparse.Namespace) -> int:
    """-q: -1, -v: 1 (-v wins over -q: asking for more is deliberate), else 0."""
    return 1 if getattr(args, "verbose", False) else -1 if getattr(args, "quiet", False) else 0


def _dispatch(argv: list[str]) -> int:
    if argv[:1] == ["run-options"]:  # the matrix's children; not in the public list
        return cmd_run.run_options_main(argv[1:])
    args = build_parser().parse_args(argv)
    setup_logging(verbosity(args)).debug(f"numalab {__version__}: {args.command}, python {sys.version.split()[0]}")
    return args.func(args)


def main(argv: list[str] | None = None) -> int:
    setup_logging()
    try:
        return _dispatch(sys.argv[1:] if argv is None else argv)
    except LabError as err:
        error(str(err))
        return 2
    except KeyboardInterrupt:
        error("interrupted", bare=True)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as err:  # a file numalab had to read or write; the library names it where it can
        where = f"{err.filename}: " if err.filename else ""
        error(f"{where}{err.strerror or err}")
        return 2


if __name__ == "__main__":
    sys.exit(main())

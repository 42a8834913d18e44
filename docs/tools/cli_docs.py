"""Shell completions (bash, zsh) and a man page, generated from numalab's own argparse parser.

    python docs/tools/cli_docs.py completions OUT_DIR   # OUT_DIR/numalab.bash, OUT_DIR/_numalab
    python docs/tools/cli_docs.py man OUT_DIR           # OUT_DIR/numalab.1

shtab turns the parser into completion scripts (from PyPI, in the dev extra), with shell functions for the
names that are not fixed choices (presets, workloads, seeds, built kernels); the man page's sections for
people are written here and its COMMANDS section comes from the parser, so neither can drift from the CLI.
Each file is written whole or not at all.
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


# --- completion ----------------------------------------------------------------------------------------------
#
# shtab completes commands, options and fixed choices from the parser. The names that are not fixed choices
# are completed by shell functions (the preambles below), attached to the arguments that take them: preset
# topology, workload and seed names are numalab's own (listed when the script is made); built kernel names are
# read from the kernel cache when <TAB> is pressed (so a fresh numalab kernel build is offered at once).


def dynamic_names() -> dict[str, list[str]]:
    """The names each completion function offers besides files: presets, built-in workloads, seeds."""
    from lab.seeds.reproduce import SEEDS
    from lab.topology.model.spec import preset_names
    from lab.workloads.registry import WORKLOADS

    return {"topologies": list(preset_names()), "workloads": list(WORKLOADS), "seeds": list(SEEDS)}


# Which function completes an argument, by its destination.
COMPLETERS = {"topology": "topologies", "workload": "workloads", "seed": "seeds", "kernel": "kernels"}
# The directory of built kernel names: lab.paths.cache_root()/kernels/built, as a shell expression.
_BUILT = '"${NUMALAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/numalab}/kernels/built"'


def _bash_preamble(names: dict[str, list[str]]) -> str:
    out = []
    for kind in ("topologies", "workloads"):
        words = " ".join(names[kind])
        out.append(f'_numalab_{kind}() {{\n  compgen -W "{words}" -- "$1"\n  compgen -f -- "$1"\n}}')
    out.append(f'_numalab_seeds() {{\n  compgen -W "{" ".join(names["seeds"])}" -- "$1"\n}}')
    out.append(
        "_numalab_kernels() {\n"
        f"  local built={_BUILT}\n"
        '  compgen -W "stock $(cd "$built" 2>/dev/null && printf \'%s \' *)" -- "$1"\n'
        '  compgen -f -- "$1"\n}'
    )
    return "\n".join(out) + "\n"


def _zsh_preamble(names: dict[str, list[str]]) -> str:
    out = []
    for kind, what in (("topologies", "preset"), ("workloads", "built-in workload")):
        words = " ".join(names[kind])
        out.append(f"_numalab_{kind}() {{\n  _alternative '{kind}:{what}:({words})' 'files:file:_files'\n}}")
    out.append(f"_numalab_seeds() {{\n  compadd -- {' '.join(names['seeds'])}\n}}")
    out.append(
        "_numalab_kernels() {\n"
        f"  local built={_BUILT}\n"
        "  local -a names; names=(stock ${built}/*(N:t))\n"
        "  _alternative \"kernels:built kernel:(${names})\" 'files:bzImage:_files'\n}"
    )
    return "\n".join(out) + "\n"


def _attach_completers(parser: argparse.ArgumentParser) -> None:
    for p in [parser, *subcommands(parser).values()]:
        for action in p._actions:  # noqa: SLF001
            kind = COMPLETERS.get(action.dest)
            if kind and action.help != argparse.SUPPRESS and not action.choices:
                action.complete = {"bash": f"_numalab_{kind}", "zsh": f"_numalab_{kind}"}  # type: ignore[attr-defined]


def completions(out_dir: Path) -> list[Path]:
    import shtab

    names = dynamic_names()
    paths = []
    for shell, name, preamble in (("bash", "numalab.bash", _bash_preamble), ("zsh", "_numalab", _zsh_preamble)):
        parser = public_parser()
        _attach_completers(parser)
        _write(out_dir / name, shtab.complete(parser, shell=shell, preamble=preamble(names)))
        paths.append(out_dir / name)
    return paths


# --- the man page ---------------------------------------------------------------------------------------------
#
# Written here section by section (NAME, SYNOPSIS, DESCRIPTION, OPTIONS, COMMANDS, EXAMPLES, EXIT STATUS,
# ENVIRONMENT, FILES, SEE ALSO); COMMANDS is the parser's own text, so it cannot drift from --help.

DESCRIPTION = """\
numalab boots QEMU/KVM virtual machines that emulate NUMA machines (rings, meshes, grids, memory tiers and
the real machines of the seed threads), pins their vCPUs and binds their memory on the host, runs a NUMA
workload in the guest with the NUMA-balancing tracepoints traced, and writes a run record: trace.dat,
/proc/vmstat snapshots, the workload's results and the guest's own view of its topology and sched domains.
Two kernels are compared A/B in the style of mmtests' compare-kernels, with Welch's test; a series of
patches can be bisected on a metric; a matrix of topologies, kernels, workloads and settings can be run
locally or in CI.
.PP
The same notion has the same option in every command: --topology, --workload, --duration,
--numa-balancing, --knob, --append, --qemu, --accel and --clock set a run wherever runs are made (run,
bisect); --decide, --min-pairs, --max-pairs and --time-budget are what decides an A/B and what it may
spend (run --repeat auto, bisect); --significance chooses the rule (run, compare, report); --json prints
JSON on stdout. Bad input is one line, numalab: error: ..., and exit status 2.
"""

OPTIONS = [
    ("-q, --quiet", "No progress lines on stderr: warnings and errors only. Before or after the command."),
    ("-v, --verbose", "Also debug lines on stderr. Before or after the command."),
    ("--version", "Print numalab's version."),
    ("-h, --help", "Help on numalab, or on a command (numalab run --help)."),
]

EXAMPLES = [
    (
        "The presets, and one of them with its SLIT and the kernel's predicted sched domains:",
        "numalab topo list\nnumalab topo show ring-4",
    ),
    (
        "One traced run of numa01 for 20 seconds on ring-4:",
        "numalab run --topology ring-4 --workload numa01 --duration 20",
    ),
    (
        "Build a patched kernel, then compare it with Debian's A/B until the verdict is significant:",
        "numalab kernel build --name my-fix --patch 0001-sched-numa-foo.patch\n"
        "numalab run --kernel stock --kernel my-fix --repeat auto --decide vmstat.hint_local_pct \\\n"
        "    --max-pairs 8 --time-budget 3600",
    ),
    (
        "An mmtests-style table of two sets of run records, and an HTML report:",
        "numalab compare --baseline runs/a* --new runs/b*\nnumalab report runs/a* runs/b* --out report.html",
    ),
    (
        "Which patch of a series moved a metric, with the runs made under NUMA balancing mode 2 and a knob:",
        "numalab bisect --series patches/ --decide vmstat.hint_local_pct --numa-balancing tiering \\\n"
        "    --knob scan_delay_ms=100 --out b1",
    ),
    (
        "A matrix, two VMs at a time; and a seed thread's known answer:",
        "numalab matrix run my.yaml --max-vms 2\nnumalab reproduce 003",
    ),
]

EXIT_STATUS = [
    ("0", "Success."),
    (
        "1",
        "The command ran, and what it found is a failure: run, a run whose status is not ok; matrix run and "
        "matrix merge, a run not ok or a gate that failed; report, a run whose trace is damaged; bisect replay, "
        "a recorded step the replay disagrees with.",
    ),
    (
        "2",
        "Bad input or a usage error: one line on stderr, numalab: error: ..., naming the option, the field or "
        "the file. Nothing is left half-written.",
    ),
    (
        "130, 143",
        "Interrupted by SIGINT or SIGTERM (run, matrix run, bisect); the finished runs are kept, and "
        "running the same command again resumes a matrix or a bisect.",
    ),
]

ENVIRONMENT = [
    (
        "NUMALAB_CACHE",
        "numalab's cache: stock and built kernels, guest images, the KVM probe's verdict, ccache, "
        "QEMU 10 builds. Default $XDG_CACHE_HOME/numalab, else ~/.cache/numalab.",
    ),
    ("XDG_CACHE_HOME", "Where the cache goes when NUMALAB_CACHE is not set."),
    (
        "NUMALAB_QEMU",
        "The QEMU to run VMs with when --qemu is not given: system, backports, charge or a binary's "
        "path. Default system (qemu-system-x86_64 on PATH).",
    ),
    ("NUMALAB_KERNEL_PROGRESS_S", "Seconds between the progress lines of a kernel build (default 15)."),
    (
        "NUMALAB_CLANG",
        "The clang that builds the example sched_ext schedulers of a kernel built with --fragment sched-ext "
        "(default clang-16).",
    ),
    ("NUMALAB_LLVM_STRIP", "The llvm-strip of that build (default llvm-strip-16)."),
    (
        "NUMALAB_TEST_STALE_CCACHE",
        "For numalab's own tests only: 1 builds kernels with the recipe that could carry a stale payload, "
        "unchecked, so a test can show that the guest's build-id check catches one. Never set it otherwise.",
    ),
    (
        "NUMALAB_NESTED_NO_KVM_HOLD",
        "For reproducing the nested tier's freeze only (tests/bench/nested_kvm_flips.py): 1 makes a serving "
        "outer guest of numalab nested --libvirt-host not hold its KVM VM. Never set it otherwise.",
    ),
]

FILES = [
    (
        "$NUMALAB_CACHE/kernels/built/NAME",
        "A built kernel's name (numalab kernel build --name), a link to its "
        "build in $NUMALAB_CACHE/kernels/builds/KEY/ (bzImage, config, System.map, build.log).",
    ),
    (
        "runs/",
        "Where run records go (run --runs-dir), each a directory with manifest.json, trace.dat and the "
        "guest's results; runs/matrix-NAME/ and runs/reproduce-seedNNN/ for matrices and reproductions.",
    ),
    (
        "topologies/*.yaml",
        "The preset topologies (numalab topo list); a spec file of your own works wherever a preset name does.",
    ),
    ("kernel-configs/", "The config fragments every build merges (base, numa, trace) and example patches."),
    (
        "build/man/numalab.1, build/completions/",
        "This page and the bash and zsh completion (make man, make completions).",
    ),
]

SEE_ALSO = (
    "trace-cmd(1), kernelshark(1), numactl(8), qemu-system-x86_64(1), virsh(1). The documentation: README.md "
    "and docs/ (the command line: docs/cli.md), or the site make docs builds in site/index.html."
)


def _roff(text: str) -> str:
    """Plain text as roff: backslashes and hyphens escaped, no line starting with a control character."""
    out = []
    for line in text.replace("\\", "\\e").replace("-", "\\-").splitlines():
        out.append(f"\\&{line}" if line.startswith((".", "'")) else line)
    return "\n".join(out)


def _tp(term: str, body: str) -> str:
    return f".TP\n.B {_roff(term)}\n{_roff(body)}\n"


def _command(path: str, p: argparse.ArgumentParser) -> str:
    """One command: its usage, description and options (by argument group), from its parser."""
    out = f'.SS "numalab {path}"\n'
    if p.description:
        out += _roff(" ".join(p.description.split())) + "\n"
    usage = "\n".join(ln.strip() for ln in p.format_usage().removeprefix("usage: ").strip().splitlines())
    out += ".PP\n.nf\n" + _roff(usage) + "\n.fi\n"
    for group in p._action_groups:  # noqa: SLF001
        shown = [a for a in group._group_actions if a.help != argparse.SUPPRESS]  # noqa: SLF001
        shown = [a for a in shown if not isinstance(a, (argparse._SubParsersAction, argparse._HelpAction))]  # noqa: SLF001
        shown = [a for a in shown if a.dest not in ("quiet", "verbose")]  # (OPTIONS has them, for every command)
        if not shown:
            continue
        out += f".PP\n.I {_roff(group.title or '')}\n"
        fmt = p._get_formatter()  # noqa: SLF001
        for a in shown:  # argparse's own words for the option and its help (% expanded)
            term = fmt._format_action_invocation(a)  # noqa: SLF001
            out += _tp(term, " ".join(fmt._expand_help(a).split()) if a.help else "")  # noqa: SLF001
    return out


def man_text() -> str:
    parser = public_parser()
    cmds = subcommands(parser)
    page = [f'.TH NUMALAB 1 "" "numalab {__version__}" "numalab manual"']
    page.append(".SH NAME\nnumalab \\- QEMU/KVM lab for Linux NUMA\\-balancing and topology work")
    page.append(
        ".SH SYNOPSIS\n.nf\n"
        + _roff(
            "numalab [-q | -v] COMMAND [options]\n"
            "numalab run [--topology NAME|FILE] [--kernel KERNEL [--kernel KERNEL]] [--workload NAME|FILE] ...\n"
            "numalab bisect --series DIR --decide METRIC --out DIR [run settings]\n"
            "numalab COMMAND --help"
        )
        + "\n.fi"
    )
    page.append(".SH DESCRIPTION\n" + _roff(DESCRIPTION).replace("\\&.PP", ".PP"))
    page.append(".SH OPTIONS\n" + "".join(_tp(t, b) for t, b in OPTIONS).rstrip())
    summary = "".join(_tp(f"numalab {path}", cmd.description or "") for path, cmd in cmds.items() if " " not in path)
    page.append(".SH COMMANDS\n" + summary + "".join(_command(path, cmd) for path, cmd in cmds.items()).rstrip())
    page.append(".SH EXAMPLES\n" + "".join(f".PP\n{_roff(what)}\n.PP\n.RS\n.nf\n{_roff(cmd)}\n.fi\n.RE\n"
                                          for what, cmd in EXAMPLES).rstrip())  # fmt: skip
    page.append(".SH EXIT STATUS\n" + "".join(_tp(t, b) for t, b in EXIT_STATUS).rstrip())
    page.append(".SH ENVIRONMENT\n" + "".join(_tp(t, b) for t, b in ENVIRONMENT).rstrip())
    page.append(".SH FILES\n" + "".join(_tp(t, b) for t, b in FILES).rstrip())
    page.append('.SH "SEE ALSO"\n' + _roff(SEE_ALSO))
    return "\n".join(page) + "\n"


def man(out_dir: Path) -> list[Path]:
    _write(out_dir / "numalab.1", man_text())
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

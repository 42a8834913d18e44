"""One vocabulary on the command line (issue 40): the test walks every command's parser and fails when one
notion shows under two names, when an option several commands share has two defaults or two sets of choices,
when a hidden option is not an alias of a shown one, or when a long --help is not grouped. Also: the old
spellings still work (hidden, for one release), -q/-v go before or after the command, and docs/cli.md lists
exactly the commands that have --json."""

from __future__ import annotations

import argparse
import re

import pytest
from common import REPO, numalab

from lab.analysis.ab_plan import ABPlan
from lab.cli.main import build_parser
from lab.cli.shared_options import JSON_HELP

# Names of one notion: at most one of each set may be shown anywhere on the command line.
SYNONYMS = [
    {"--decide", "--metric"},
    {"--min-pairs", "--min-repeats", "--min-runs"},
    {"--max-pairs", "--max-repeats", "--max-runs"},
    {"--time-budget", "--budget"},
    {"--max-vms", "--vms", "--parallel", "--jobs"},
    {"--make-jobs", "--jobs"},
    {"--topology", "--topo"},
    {"--numa-balancing", "--balancing"},
    {"--significance", "--rule"},
    {"--min-effect", "--effect", "--min-diff", "--effect-threshold", "--min-change"},
    {"--quiet", "--silent"},
    {"--verbose", "--debug"},
    {"--out", "--output", "--out-dir"},
]

# (command, option) whose default or choices differ from the other commands' on purpose, and why.
DIFFERENT_ON_PURPOSE = {
    ("topo import", "--cpus-per-node"): "the sizes of the spec it writes (2, or the fewest its CPU grid allows)",
    ("topo import", "--mem-per-node"): "the sizes of the spec it writes (512M), not an override of a spec's own",
    ("topo qemu-args", "--accel"): "printing a VM definition probes nothing: kvm or tcg, default tcg",
    ("topo libvirt-xml", "--accel"): "printing a VM definition probes nothing: kvm or tcg, default tcg",
    ("matrix lava", "--accel"): "a LAVA device is one or the other, and no job probes: kvm or tcg, default tcg",
    ("matrix run", "--backend"): "none given: the spec's hosts (libvirt) or qemu",
    ("ab", "--repeat"): "auto: numalab ab ends with a verdict (run's 1: one run unless asked)",
    ("nested", "--topology"): "the outer machine, the inner numalab's host: ring-2, a two-socket workstation",
    ("nested", "--timeout"): "the outer guest's whole life (1800 s), not one run's",
}

# Hidden options that are not aliases: the tests' fault injection, and what QEMU's version chooses.
INTERNAL = {("run", "--test-fault"), ("run", "--access-address-map"), ("ab", "--test-fault"),
            ("ab", "--access-address-map"), ("topo vng-args", "--backing"),
            ("topo vng-args", "--prealloc")}  # fmt: skip

# What a run is made with, wherever runs are made for you.
RUN_SETTINGS = ["--topology", "--cpus-per-node", "--mem-per-node", "--workload", "--duration", "--numa-balancing",
                "--knob", "--kernel-default-knobs", "--append", "--event", "--no-trace", "--trace-mode", "--qemu",
                "--accel", "--clock", "--decide", "--min-pairs", "--max-pairs", "--time-budget"]  # fmt: skip


def _commands() -> dict[str, argparse.ArgumentParser]:
    """Every command that runs (no subcommands of its own), by its path: 'run', 'topo show', ..."""
    out: dict[str, argparse.ArgumentParser] = {}

    def walk(p: argparse.ArgumentParser, path: str) -> None:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs and path:
            out[path] = p
        for a in subs:
            for name, sp in a.choices.items():
                walk(sp, f"{path} {name}".strip())

    walk(build_parser(), "")
    return out


COMMANDS = _commands()


def _options(p: argparse.ArgumentParser, shown: bool = True) -> dict[str, argparse.Action]:
    return {s: a for a in p._actions for s in a.option_strings if (a.help != argparse.SUPPRESS) == shown}


def test_no_notion_shows_under_two_names() -> None:
    shown = {s for p in COMMANDS.values() for s in _options(p)}
    for names in SYNONYMS:
        assert len(names & shown) <= 1, f"one notion, names {sorted(names & shown)}"
    assert "--jobs" not in shown  # it meant make -j in one command and VMs at once in others


def test_a_shared_option_has_one_default_and_one_set_of_choices() -> None:
    seen: dict[str, tuple[str, argparse.Action]] = {}
    for path, p in COMMANDS.items():
        for s, a in _options(p).items():
            if (path, s) in DIFFERENT_ON_PURPOSE or s in ("-h", "--help"):
                continue
            if s not in seen:
                seen[s] = (path, a)
                continue
            first, b = seen[s]
            assert a.default == b.default, f"{s}: default {a.default!r} in {path}, {b.default!r} in {first}"
            assert a.choices == b.choices, f"{s}: choices {a.choices} in {path}, {b.choices} in {first}"
            assert type(a) is type(b), f"{s}: a {type(a).__name__} in {path}, a {type(b).__name__} in {first}"


def test_run_and_bisect_take_the_same_run_settings() -> None:
    for name in ("run", "bisect", "ab"):
        missing = [s for s in RUN_SETTINGS if s not in _options(COMMANDS[name])]
        assert missing == [], f"{name}: {missing}"
    assert "tiering" in _options(COMMANDS["bisect"])["--numa-balancing"].choices


def test_json_says_the_same_everywhere_and_the_doc_lists_exactly_its_commands() -> None:
    have = sorted(path for path, p in COMMANDS.items() if "--json" in _options(p))
    for path in have:
        assert _options(COMMANDS[path])["--json"].help == JSON_HELP, path
    doc = (REPO / "docs" / "cli.md").read_text()
    paragraph = next(p for p in doc.split("\n\n") if p.startswith("Commands with `--json`:"))
    assert sorted(re.findall(r"`([a-z -]+)`", paragraph.split(":", 1)[1])) == have


def test_a_hidden_option_is_an_alias_of_a_shown_one() -> None:
    for path, p in COMMANDS.items():
        shown_dests = {a.dest for a in _options(p).values()}
        for s, a in _options(p, shown=False).items():
            if (path, s) not in INTERNAL:
                assert a.dest in shown_dests, f"{path} {s}: hidden, and no shown option sets {a.dest}"


def test_a_long_help_is_grouped() -> None:
    for path, p in COMMANDS.items():
        groups = [[a for a in g._group_actions if a.help != argparse.SUPPRESS] for g in p._action_groups]
        count = sum(len(g) for g in groups)
        if count > 12:
            assert max(len(g) for g in groups) <= 12 and sum(1 for g in groups if g) >= 3, path


@pytest.mark.parametrize(
    "argv,dest,value",
    [
        (["run", "--min-repeats", "4"], "min_pairs", 4),
        (["run", "--max-repeats", "6"], "max_pairs", 6),
        (["bisect", "--metric", "timings.boot_s"], "decide", ["timings.boot_s"]),
        (["bisect", "--budget", "60"], "time_budget", 60.0),
        (["matrix", "run", "m.yaml", "--jobs", "2"], "max_vms", 2),
        (["reproduce", "3", "--jobs", "2"], "max_vms", 2),
        (["reproduce", "3", "--max-repeats", "5"], "max_pairs", 5),
        (["kernel", "build", "--jobs", "3"], "make_jobs", 3),
        (["kernel", "build", "-j", "3"], "make_jobs", 3),
    ],
)
def test_old_spellings_still_work(argv, dest, value) -> None:
    assert getattr(build_parser().parse_args(argv), dest) == value


def test_quiet_and_verbose_go_before_or_after_the_command() -> None:
    p = build_parser()
    assert p.parse_args(["-q", "topo", "list"]).quiet is True
    assert p.parse_args(["topo", "list", "-q"]).quiet is True
    assert p.parse_args(["--verbose", "kernel", "build"]).verbose is True
    assert p.parse_args(["kernel", "build", "--quiet"]).quiet is True
    args = p.parse_args(["topo", "list"])
    assert args.quiet is False and args.verbose is False


def test_progress_goes_through_one_path_that_quiet_and_verbose_set() -> None:
    plain = numalab("matrix", "list", "ci-smoke", timeout=60)
    assert plain.returncode == 0 and plain.stderr.startswith("numalab: ") and "runs (of" in plain.stderr
    quiet = numalab("matrix", "list", "ci-smoke", "-q", timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == plain.stdout
    verbose = numalab("-v", "matrix", "list", "ci-smoke", timeout=60)
    assert verbose.returncode == 0 and "numalab: debug: " in verbose.stderr


def test_topo_list_shows_the_slit_values() -> None:
    proc = numalab("topo", "list", timeout=60)
    assert proc.returncode == 0 and "SLIT VALUES" in proc.stdout.splitlines()[0]
    row = next(ln for ln in proc.stdout.splitlines() if ln.startswith("tiered-1s-far "))
    assert " 10/20 " in row  # its SLIT; the kernel's distance levels among CPU nodes are only 10


def test_bisect_makes_its_runs_with_the_run_settings_given(monkeypatch, tmp_path) -> None:
    """bisect's run settings reach the RunOptions every run is made from (lab.bisect.kernel_steps' template),
    with run's defaults where none is given; those not at run's defaults are recorded in the config."""
    import lab.bisect.engine as engine
    import lab.bisect.kernel_steps as kernel_steps
    import lab.cli.cmd_bisect as cmd_bisect

    seen: dict = {}

    class Stop(Exception):
        pass

    class Runner:
        def __init__(self, source, series, fragments, template, progress) -> None:
            seen["template"] = template

    class Bisect:
        def __init__(self, out, cfg, runner, progress) -> None:
            seen["cfg"] = cfg

        def run(self):
            raise Stop

    monkeypatch.setattr(kernel_steps, "KernelStepRunner", Runner)
    monkeypatch.setattr(engine, "Bisect", Bisect)
    monkeypatch.setattr(cmd_bisect, "_check_before_building", lambda template: None)  # (no QEMU asked)
    series = str(REPO / "kernel-configs" / "patches" / "bisect-example")
    args = build_parser().parse_args(["bisect", "--series", series, "--out", str(tmp_path / "b"), "--metric",
                                      "timings.boot_s", "--budget", "60", "--knob", "scan_delay_ms=100", "--append",
                                      "initcall_debug", "--numa-balancing", "tiering", "--accel", "tcg", "--clock",
                                      "virtual", "--qemu", "backports", "--event", "sched:sched_switch"])  # fmt: skip
    with pytest.raises(Stop):
        args.func(args)
    t = seen["template"]
    assert (t.topology.name, t.workload, t.duration) == ("ring-4", "numa01", 20.0)  # run's defaults
    assert t.knobs == ("scan_delay_ms=100",) and t.append == ("initcall_debug",)
    assert t.tracing.events == ("sched:sched_switch",)
    assert (t.numa_balancing, t.vm.accel, t.guest_time.clock, t.vm.qemu) == ("tiering", "tcg", "virtual", "backports")
    cfg = seen["cfg"]
    assert cfg.plan == ABPlan(("timings.boot_s",), 3, 8, 60.0) and cfg.metric == "timings.boot_s"
    assert cfg.what["run_settings"] == {"accel": "tcg", "append": ["initcall_debug"], "clock": "virtual",
                                        "events": ["sched:sched_switch"], "knobs": ["scan_delay_ms=100"],
                                        "qemu": "backports"}  # fmt: skip
    assert cfg.context == "ring-4/numa01/balancing-tiering"


def test_quiet_keeps_the_library_s_warnings(capsys) -> None:
    from lab.cli.common import progress, setup_logging

    try:
        setup_logging(-1)
        progress("building...")
        progress("warning: no slow memory tier")
        assert capsys.readouterr().err == "numalab: warning: no slow memory tier\n"
        setup_logging(0)
        progress("building...")
        assert capsys.readouterr().err == "numalab: building...\n"
    finally:
        setup_logging(0)

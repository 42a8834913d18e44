"""One A/B plan (issue 50): its names and defaults are the same in ``run --repeat auto``, ``ab``, ``bisect``, a
matrix's ``auto:`` and the library's ABPlan. Everything compared is read from the code: the plan's fields and
defaults from the dataclass, the options from the commands' argparse parsers, the spec's keys from the matrix
parser and its JSON Schema; nothing here lists the names by hand."""

from __future__ import annotations

import argparse
import json
from dataclasses import fields, replace

import pytest
from common import REPO

from lab.analysis.ab_plan import WORKLOAD_FIGURE, ABPlan, option_name
from lab.analysis.metrics import NEUTRAL, get_metric
from lab.bisect.engine import Config
from lab.cli.main import build_parser
from lab.cli.shared_options import ab_plan_of
from lab.errors import LabError
from lab.matrix.spec_parts import AUTO_ALIASES, parse_auto

NAMES = ABPlan.names()
DEFAULT = ABPlan()
# A plan whose every field differs from the default (the values, not the names, are this test's own).
OTHER = ABPlan(("vmstat.hint_local_pct",), DEFAULT.min_pairs + 1, DEFAULT.max_pairs + 2, 60.0, "ci-overlap", 2.0)
# The shortest command line of each command that makes an A/B plan.
ARGV = {"run": ["run", "--repeat", "auto"], "ab": ["ab", "tree", "--base", "v1"], "bisect": ["bisect"]}


def _sub(name: str) -> argparse.ArgumentParser:
    (subs,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return subs.choices[name]


def _shown(p: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """dest -> the shown (not hidden-alias) option of that destination."""
    return {a.dest: a for a in p._actions if a.option_strings and a.help != argparse.SUPPRESS}


def _argv(plan: ABPlan, names: set[str]) -> list[str]:
    out: list[str] = []
    for name in sorted(names):
        value = getattr(plan, name)
        for v in value if isinstance(value, tuple) else (value,):
            out += [option_name(name), str(v)]
    return out


def test_every_field_differs_in_other() -> None:
    """(so that the checks below, which build OTHER through each front end, see every field move)"""
    assert all(getattr(OTHER, f) != getattr(DEFAULT, f) for f in NAMES)
    assert OTHER.check() is OTHER and DEFAULT.check() is DEFAULT
    assert NAMES == tuple(f.name for f in fields(ABPlan))


@pytest.mark.parametrize("command", sorted(ARGV))
def test_each_command_takes_the_plan_by_its_names_and_defaults(command: str) -> None:
    parser = build_parser()
    options = _shown(_sub(command))
    plan_options = {n: options[n] for n in NAMES if n in options}
    # each field the command takes is one option named after it, defaulting to None (the plan's default) or to it
    for name, action in plan_options.items():
        assert action.option_strings[-1] == option_name(name), (command, name)
        assert action.default in (None, getattr(DEFAULT, name)), (command, name, action.default)
    # nothing given: the library's defaults
    assert ab_plan_of(parser.parse_args(ARGV[command])) == DEFAULT
    # every field given: the plan asked for, field by field
    given = parser.parse_args(ARGV[command] + _argv(OTHER, set(plan_options)))
    want = replace(DEFAULT, **{n: getattr(OTHER, n) for n in plan_options})
    assert ab_plan_of(given) == want
    # a field the command has no option for keeps the default, and the command's library refuses another value
    for name in set(NAMES) - set(plan_options):
        assert command == "bisect", (command, name)  # run and ab take every field
        with pytest.raises(LabError, match=f"^{option_name(name)}: "):
            Config(replace(want, **{name: getattr(OTHER, name)}), ("a.patch",)).check()


def test_help_texts_give_the_library_s_defaults() -> None:
    options = _shown(_sub("run"))
    assert f"default {DEFAULT.decide[0]}" in options["decide"].help
    assert f"default {DEFAULT.min_pairs}" in options["min_pairs"].help
    assert f"default {DEFAULT.max_pairs}" in options["max_pairs"].help


def test_the_matrix_spec_takes_the_plan_by_its_names_and_defaults() -> None:
    assert parse_auto(None) == DEFAULT == parse_auto({})
    assert parse_auto(OTHER.to_dict()) == OTHER
    # the keys it had before are aliases of the plan's names
    assert set(AUTO_ALIASES.values()) <= set(NAMES)
    old = {old: OTHER.to_dict()[new] for old, new in AUTO_ALIASES.items()}
    assert parse_auto({k: v for k, v in OTHER.to_dict().items() if k not in AUTO_ALIASES.values()} | old) == OTHER
    # and the schema knows every name, new and old
    schema = json.loads((REPO / "lab" / "schemas" / "matrix.schema.json").read_text())
    assert set(schema["properties"]["auto"]["properties"]) == set(NAMES) | set(AUTO_ALIASES)


def test_the_default_decides_on_the_workload_s_own_figure() -> None:
    """One default everywhere: not a mechanism counter, which can only say "changed"."""
    assert DEFAULT.decide == (WORKLOAD_FIGURE,)
    from lab.analysis.verdict import workload_figure
    from lab.workloads.registry import WORKLOADS

    for name, w in WORKLOADS.items():
        assert get_metric(workload_figure(w)).better != NEUTRAL, name


def test_bisect_json_keeps_its_names() -> None:
    """bisect.json writes the plan by the names it always had (metric, budget_s...) and reads it back."""
    cfg = Config(replace(OTHER, significance="welch"), ("a.patch",))
    example = json.loads((REPO / "tests" / "data" / "bisect" / "example" / "bisect.json").read_text())["config"]
    assert set(example) <= set(cfg.to_dict())
    assert Config.from_dict(cfg.to_dict()) == cfg


@pytest.mark.parametrize(
    ("plan", "needle"),
    [
        (ABPlan(()), "--decide: expected one or more metric names, got ()"),
        (ABPlan(min_pairs=0), "--min-pairs: must be between 1 and --max-pairs (8), got 0"),
        (ABPlan(min_pairs=9), "--min-pairs: must be between 1 and --max-pairs (8), got 9"),
        (ABPlan(max_pairs=1001), "--max-pairs: must be 1..1000, got 1001"),
        (ABPlan(max_pairs="8"), "--max-pairs: expected a whole number, got '8'"),  # type: ignore[arg-type]
        (ABPlan(time_budget=-1), "--time-budget: must be > 0 seconds, got -1"),
        (ABPlan(time_budget=float("nan")), "--time-budget: must be > 0 seconds, got nan"),
        (ABPlan(significance="t"), "--significance: 't' is not one of welch, ci-overlap"),
        (ABPlan(min_effect=-2), "--min-effect: must be between 0% and 1000%, got -2"),
    ],
)
def test_the_one_check_names_the_field(plan: ABPlan, needle: str) -> None:
    with pytest.raises(LabError) as err:
        plan.check()
    assert str(err.value) == needle
    with pytest.raises(LabError) as err:
        plan.check(lambda name: f"auto.{name}")
    assert str(err.value).startswith("auto.") and "--" not in str(err.value)


def test_a_matrix_cell_decides_on_its_own_workload_s_figure() -> None:
    """The spec's default ``decide`` is resolved for each cell: its workload's figure, the rate itself when a
    side runs under the virtual clock (no twins there)."""
    from lab.analysis.verdict import workload_figure
    from lab.matrix.auto_cells import cell_decide
    from lab.matrix.definition import parse_matrix
    from lab.workloads.registry import WORKLOADS

    spec = parse_matrix({"topologies": ["ring-2"], "kernels": ["a", {"name": "b", "path": "/bin/true"}],
                         "workloads": [{"name": "pairs", "duration": 1}, {"name": "numa01", "duration": 1}],
                         "repeats": "auto"}, "t.yaml", "t")  # fmt: skip
    assert spec.auto == DEFAULT
    for name in ("pairs", "numa01"):
        cell = [r for r in spec.runs if r.workload.name == name]
        assert cell_decide(spec.auto.decide, cell) == [workload_figure(WORKLOADS[name])]
        virtual = [replace(r, setting=replace(r.setting, clock="virtual")) for r in cell]
        assert cell_decide(spec.auto.decide, virtual) == [workload_figure(WORKLOADS[name], "virtual")]
    assert workload_figure(WORKLOADS["numa01"]) != workload_figure(WORKLOADS["numa01"], "virtual")  # (it can fail)
    assert cell_decide(OTHER.decide, spec.runs) == list(OTHER.decide)


def test_decide_may_be_given_as_one_name_or_a_list() -> None:
    assert ABPlan("workload.gbps").decide == ("workload.gbps",)
    assert ABPlan(["a.b", "c.d", "a.b"]).decide == ("a.b", "c.d")  # type: ignore[arg-type]
    assert ABPlan.of(decide=None, max_pairs=None) == DEFAULT
    with pytest.raises(LabError, match="^max_repeats: not a field of the A/B plan"):
        ABPlan.of(max_repeats=3)

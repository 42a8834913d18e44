"""Every command's --help renders, and no description prints a literal ``%%`` (argparse formats help
strings with %, not descriptions: compare's and bisect's printed ``%%diff`` and ``95%%`` once)."""

from __future__ import annotations

import argparse

from lab.cli.main import build_parser


def _parsers(p: argparse.ArgumentParser, name: str = "numalab"):
    yield name, p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_every_help_renders_without_a_literal_double_percent() -> None:
    seen = []
    for name, p in _parsers(build_parser()):
        text = p.format_help()
        assert "%%" not in text, name
        seen.append(name)
    assert {"numalab run", "numalab compare", "numalab bisect", "numalab matrix run"} <= set(seen)
    assert "numalab run-options" not in seen  # (the matrix's child command is not public)

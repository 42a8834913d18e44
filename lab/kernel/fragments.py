"""Kconfig fragments: parse them, and check a final .config against what they asked for.

A fragment is a .config excerpt: ``CONFIG_FOO=y``, ``CONFIG_BAR="text"``,
``# CONFIG_BAZ is not set``; other comments and blank lines are ignored.
Later fragments override earlier ones, as in ``merge_config.sh``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.paths import REPO_ROOT, read_text_file

CONFIGS_DIR = REPO_ROOT / "kernel-configs"
DEFAULT_FRAGMENTS = ("base.config", "numa.config", "trace.config")

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


@dataclass(frozen=True)
class Fragment:
    path: Path
    text: str
    values: dict[str, str]  # symbol -> value ("n" for "is not set")

    @property
    def name(self) -> str:
        return self.path.name


def parse_values(text: str, where: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        m = _SET.match(line) or _UNSET.match(line)
        if m:
            values[m.group(1)] = m.group(2) if m.re is _SET else "n"
        elif not line.startswith("#"):
            raise LabError(f"{where}:{n}: not a Kconfig line (CONFIG_X=value or '# CONFIG_X is not set'): {line}")
    return values


def load_fragment(spec: str | Path) -> Fragment:
    """A fragment by path, or by name in kernel-configs/ (``numa`` or ``numa.config``)."""
    path = Path(spec)
    if not path.exists():
        for cand in (CONFIGS_DIR / str(spec), CONFIGS_DIR / f"{spec}.config"):
            if cand.is_file():
                path = cand
                break
    if not path.is_file():
        raise LabError(f"--fragment {spec}: no such file (nor in {CONFIGS_DIR})")
    text = read_text_file(path, "--fragment")
    return Fragment(path.resolve(), text, parse_values(text, str(spec)))


def load_fragments(extra: list[str] | None = None, defaults: bool = True) -> list[Fragment]:
    names: list[str | Path] = [CONFIGS_DIR / n for n in DEFAULT_FRAGMENTS] if defaults else []
    return [load_fragment(s) for s in [*names, *(extra or [])]]


def requested(fragments: list[Fragment]) -> dict[str, tuple[str, str]]:
    """symbol -> (value, fragment name); the last fragment to name a symbol wins."""
    out: dict[str, tuple[str, str]] = {}
    for f in fragments:
        for sym, val in f.values.items():
            out[sym] = (val, f.name)
    return out


def parse_config(text: str) -> dict[str, str]:
    """A .config as symbol -> value; "is not set" reads as "n"."""
    return parse_values("\n".join(ln for ln in text.splitlines() if _SET.match(ln) or _UNSET.match(ln)), ".config")


def unmet(fragments: list[Fragment], config_text: str) -> list[str]:
    """Every requested symbol that did not end up as asked, as 'CONFIG_X=want (got G, from F)'."""
    final = parse_config(config_text)
    bad = []
    for sym, (want, frag) in requested(fragments).items():
        got = final.get(sym, "n")
        if got != want:
            shown = "unset" if sym not in final else got
            bad.append(f"{sym}={want} (got {shown}, from {frag})")
    return bad


def check_config(fragments: list[Fragment], config_text: str) -> None:
    bad = unmet(fragments, config_text)
    if bad:
        raise LabError(
            f"kernel config: {len(bad)} fragment symbol(s) not set as requested (unmet dependencies?): "
            + "; ".join(bad)
        )

"""Why a Kconfig symbol did not end up as a fragment asked: its ``depends on`` read from the tree's own Kconfig
files and evaluated against the final ``.config``.

Kconfig's whole language is not needed to answer the usual case (a dependency that is off): the entry's
``config SYM`` block gives its ``depends on`` lines, the ``if EXPR`` blocks around it in the same file add
theirs, and each expression is evaluated with Kconfig's tristate logic (n=0, m=1, y=2; ``&&`` is the minimum,
``||`` the maximum, ``!`` is 2-x, ``A=B`` and ``A!=B`` compare values) on the symbols' final values. What this
cannot read (a ``depends on`` of a menu in another file, a ``choice``) it leaves unsaid: the answer names only
what it found false, and says so when it found nothing.

Example, 7.3's ``NUMA_BALANCING`` on numalab's 6.x fragments::

    CONFIG_NUMA_BALANCING=y: init/Kconfig:1031 'depends on SMP && NUMA_MIGRATION && !PREEMPT_RT' is n
    (NUMA_MIGRATION=n)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lab.kernel.fragments import _kconfig_files

_ENTRY = re.compile(r"^[ \t]*(?:menu)?config[ \t]+([A-Za-z0-9_]+)[ \t]*(?:#.*)?$")
_BLOCK_END = re.compile(r"^[ \t]*(?:config|menuconfig|choice|endchoice|menu|endmenu|if|endif|comment|source|"
                        r"rsource|osource|orsource|mainmenu)\b")  # fmt: skip
_IF = re.compile(r"^[ \t]*if[ \t]+(.+?)[ \t]*(?:#.*)?$")
_ENDIF = re.compile(r"^[ \t]*endif\b")
_DEPENDS = re.compile(r"^[ \t]*depends[ \t]+on[ \t]+(.+?)[ \t]*(?:#.*)?$")
_HELP = re.compile(r"^[ \t]*(?:help|---help---)[ \t]*$")
_TOKEN = re.compile(r"\s*(&&|\|\||!=|<=|>=|[!()=<>]|\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.-]+)")


@dataclass(frozen=True)
class Dependency:
    """One ``depends on`` (or enclosing ``if``) of a symbol's entry, where it is written."""

    where: str  # init/Kconfig:1031
    expr: str  # SMP && NUMA_MIGRATION && !PREEMPT_RT
    kind: str = "depends on"  # or "if"


class _Unreadable(Exception):
    pass


def _tokens(expr: str) -> list[str]:
    out, pos = [], 0
    expr = expr.strip()
    while pos < len(expr):
        m = _TOKEN.match(expr, pos)
        if not m:
            raise _Unreadable(expr)
        out.append(m.group(1))
        pos = m.end()
    return out


_TRI = {"n": 0, "m": 1, "y": 2}


class _Eval:
    """A recursive-descent evaluator of one Kconfig expression over final values (symbol -> 'y'/'m'/'n'/text)."""

    def __init__(self, tokens: list[str], values: dict[str, str]) -> None:
        self.t, self.i, self.values = tokens, 0, values

    def _peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def _take(self) -> str:
        if self.i >= len(self.t):
            raise _Unreadable("end of expression")
        self.i += 1
        return self.t[self.i - 1]

    def value_of(self, word: str) -> str:
        if word[:1] in "\"'":
            return word[1:-1]
        if word in _TRI:
            return word
        got = self.values.get(f"CONFIG_{word}")
        return "n" if got is None else got.strip('"')

    def tri(self, word: str) -> int:
        return _TRI.get(self.value_of(word), 0)

    def parse(self) -> int:
        v = self._or()
        if self._peek() is not None:
            raise _Unreadable(" ".join(self.t))
        return v

    def _or(self) -> int:
        v = self._and()
        while self._peek() == "||":
            self._take()
            v = max(v, self._and())
        return v

    def _and(self) -> int:
        v = self._not()
        while self._peek() == "&&":
            self._take()
            v = min(v, self._not())
        return v

    def _not(self) -> int:
        if self._peek() == "!":
            self._take()
            return 2 - self._not()
        return self._atom()

    def _atom(self) -> int:
        tok = self._take()
        if tok == "(":
            v = self._or()
            if self._take() != ")":
                raise _Unreadable(" ".join(self.t))
            return v
        if self._peek() in ("=", "!="):
            op, other = self._take(), self._take()
            same = self.value_of(tok) == self.value_of(other)
            return 2 if same == (op == "=") else 0
        if self._peek() in ("<", ">", "<=", ">="):
            raise _Unreadable("a numeric comparison")
        return self.tri(tok)


def evaluate(expr: str, values: dict[str, str]) -> int | None:
    """The tristate value (0, 1, 2) of ``expr`` over ``values`` (``CONFIG_X`` -> value), None if unreadable."""
    try:
        return _Eval(_tokens(expr), values).parse()
    except _Unreadable:
        return None


def _conjuncts(expr: str) -> list[str]:
    """The top-level ``&&`` terms of ``expr`` (parentheses respected)."""
    terms, depth, start = [], 0, 0
    i = 0
    while i < len(expr):
        c = expr[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0 and expr.startswith("&&", i):
            terms.append(expr[start:i].strip())
            start = i + 2
            i += 1
        i += 1
    terms.append(expr[start:].strip())
    return [t for t in terms if t]


def dependencies(tree: Path, symbol: str) -> list[Dependency]:
    """Every ``depends on`` of ``symbol``'s entries (without ``CONFIG_``) in the tree's x86-readable Kconfig files,
    and the ``if`` blocks around them in the same file."""
    found: list[Dependency] = []
    for path in _kconfig_files(tree):
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        if symbol not in text:
            continue
        rel = path.relative_to(tree)
        lines = text.splitlines()
        ifs: list[Dependency] = []
        inside = False
        joined = ""
        help_indent: int | None = None  # inside a help text: the indentation of the keyword
        for n, raw in enumerate(lines, 1):
            if help_indent is not None:
                wide = raw.expandtabs()
                if not raw.strip() or len(wide) - len(wide.lstrip()) > help_indent:
                    continue
                help_indent = None
            if _HELP.match(raw):
                help_indent = len(raw.expandtabs()) - len(raw.expandtabs().lstrip())
                continue
            line = joined + raw
            if line.endswith("\\"):
                joined = line[:-1] + " "
                continue
            joined = ""
            if _BLOCK_END.match(line):
                inside = False
            if m := _IF.match(line):
                ifs.append(Dependency(f"{rel}:{n}", m.group(1), "if"))
            elif _ENDIF.match(line) and ifs:
                ifs.pop()
            elif (m := _ENTRY.match(line)) and m.group(1) == symbol:
                inside = True
                found += ifs
            elif inside and (m := _DEPENDS.match(line)):
                found.append(Dependency(f"{rel}:{n}", m.group(1)))
    return list(dict.fromkeys(found))


def explain(tree: Path, symbol: str, values: dict[str, str]) -> str:
    """Why ``symbol`` (``CONFIG_X``) may not be set: its dependencies that are n in ``values``, each with the
    terms that make it so (``init/Kconfig:1031 'depends on SMP && NUMA_MIGRATION && !PREEMPT_RT' is n
    (NUMA_MIGRATION=n)``); "" when every dependency found holds or none could be read."""
    name = symbol.removeprefix("CONFIG_")
    why = []
    for dep in dependencies(tree, name):
        if evaluate(dep.expr, values) != 0:
            continue
        false_terms = []
        for term in _conjuncts(dep.expr):
            if evaluate(term, values) == 0:
                words = [w for w in _tokens(term) if re.fullmatch(r"[A-Za-z0-9_]+", w) and w not in _TRI]
                shown = ", ".join(f"{w}={_Eval([], values).value_of(w)}" for w in dict.fromkeys(words))
                false_terms.append(shown or term)
        terms = f" ({'; '.join(false_terms)})" if false_terms else ""
        why.append(f"{dep.where} '{dep.kind} {dep.expr}' is n{terms}")
    return "; ".join(why)

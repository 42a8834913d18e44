"""Bytes from a guest (a kernel under test is untrusted): numbers, JSON and text, read without raising.

Every reader of a guest's files goes through these: a number is at most :data:`MAX_DIGITS` digits
(Python refuses to convert more than 4,300 and a huge one would be nonsense anyway), JSON is bounded in
size and nesting (the standard parser recurses: 100,000 ``[`` end in RecursionError) and may not hold NaN
or Infinity, and text on its way to a terminal has its control characters escaped (:func:`term_safe`), so a
guest cannot retitle the window, clear the screen or overwrite a line with a carriage return.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

MAX_DIGITS = 40  # no counter, size or id a guest legitimately reports has more
MAX_JSON_BYTES = 1 << 20
MAX_JSON_DEPTH = 32

_INT = re.compile(rf"[+-]?[0-9]{{1,{MAX_DIGITS}}}")
_FLOAT = re.compile(rf"[+-]?(?:[0-9]{{1,{MAX_DIGITS}}}(?:\.[0-9]{{0,{MAX_DIGITS}}})?|\.[0-9]{{1,{MAX_DIGITS}}})"
                    r"(?:[eE][+-]?[0-9]{1,3})?")  # fmt: skip


def to_int(text: str) -> int | None:
    """A decimal integer of at most MAX_DIGITS ASCII digits (surrounding blanks allowed), else None."""
    s = text.strip()
    return int(s) if _INT.fullmatch(s) else None


def to_float(text: str) -> float | None:
    """A finite decimal number (no nan, inf, hex or digits beyond ASCII), else None."""
    s = text.strip()
    if not _FLOAT.fullmatch(s):
        return None
    v = float(s)
    return v if math.isfinite(v) else None


def _depth(text: str) -> int:
    """The deepest nesting of [ and { outside strings."""
    depth = deepest = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def finite_hooks(refuse: type[Exception] = ValueError, constant: str = "is not a number", shown: int = 20) -> dict:
    """``json.loads`` keyword arguments that refuse what Python's JSON reader accepts beyond JSON, NaN and
    the infinities, and a number that overflows to one (``1e999``), raising ``refuse`` with a one-line
    reason: "<constant> <``constant``>", "<the number's first ``shown`` characters> is not a finite number".
    Shared by the guest's JSON (:func:`guest_json`) and the files numalab reads (lab.datafile)."""

    def no_constant(name: str) -> object:
        raise refuse(f"{name} {constant}")

    def finite(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise refuse(f"{text[:shown]} is not a finite number")
        return value

    return {"parse_constant": no_constant, "parse_float": finite}


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise ValueError(f"a number of {len(text)} digits")
    return int(text)


def guest_json(text: str, max_bytes: int = MAX_JSON_BYTES, max_depth: int = MAX_JSON_DEPTH) -> object:
    """JSON from a guest: at most ``max_bytes`` and ``max_depth`` deep, numbers finite and of at most
    MAX_DIGITS digits. Raises ValueError (only) with a one-line reason."""
    if len(text) > max_bytes:
        raise ValueError(f"{len(text)} characters, more than {max_bytes}")
    if _depth(text) > max_depth:
        raise ValueError(f"nested more than {max_depth} deep")
    try:
        return json.loads(text, parse_int=_bounded_int, **finite_hooks())
    except json.JSONDecodeError as e:
        raise ValueError(f"not valid JSON ({e.msg} at character {e.pos})") from None
    except RecursionError:  # (the depth check keeps it out; belt and braces)
        raise ValueError("nested too deep") from None


# C0 controls but newline and tab, DEL, and C1 controls (0x9b is a one-byte CSI on some terminals);
# also the Unicode line/paragraph separators and bidi overrides, which reorder what is shown.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


# A lone surrogate: what Python makes of a byte that is not UTF-8 in a file name (os.fsdecode) or in a tool's
# output read with errors="surrogateescape" (lab.paths.TOOL_TEXT). Printed, it raises UnicodeEncodeError.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_surrogate(m: re.Match[str]) -> str:
    c = ord(m.group(0))
    return f"\\x{c - 0xDC00:02x}" if 0xDC80 <= c <= 0xDCFF else f"\\u{c:04x}"


def escape_surrogates(text: str) -> str:
    """``text`` printable as UTF-8: each byte that was not UTF-8 (a surrogate escape, U+DC80..U+DCFF) shown as
    ``\\xNN``, the byte it was (``caf\\xe9.c``), any other lone surrogate as ``\\uNNNN``."""
    return _SURROGATE.sub(_escape_surrogate, text)


_SGR = re.compile(r"\x1b\[[0-9;]{0,32}m")


def strip_colours(text: str) -> str:
    """``text`` without its terminal colour codes (``ESC[...m``: a Rust logger's level and fields), so that a
    program's words read as words; every other control character is left for :func:`term_safe`."""
    return _SGR.sub("", text)


def term_safe(text: object, newlines: bool = False) -> str:
    """``text`` with every control character shown as an escape (ESC as ``\\x1b``, CR as ``\\x0d``); tabs
    stay, newlines stay only with ``newlines`` (else ``\\x0a``); a byte that was not UTF-8 as ``\\xNN``
    (:func:`escape_surrogates`). For anything a guest said on its way to a terminal."""
    s = escape_surrogates(str(text))
    out = _CONTROL.sub(_escape, s)
    return out if newlines else out.replace("\n", "\\x0a")


def shown(text: str, limit: int = 80) -> str:
    """A piece of guest text for a message: escaped (:func:`term_safe`) and cut to ``limit`` characters."""
    s = term_safe(text)
    return repr(s if len(s) <= limit else s[:limit] + "...")


def read_guest_text(path: Path, problems: list[str] | None = None) -> str | None:
    """A guest file as text (None if it is not there or not a regular file). Bytes that are not UTF-8
    become U+FFFD, and ``problems`` is told which file and where."""
    try:
        if not path.is_file():
            if path.exists() and problems is not None:
                problems.append(f"{path.name} is not a file")
            return None
        data = path.read_bytes()
    except OSError as e:
        if problems is not None:
            problems.append(f"{path.name}: cannot read ({e.strerror or e})")
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        if problems is not None:
            line = data[: e.start].count(b"\n") + 1
            problems.append(f"{path.name}: not UTF-8 text (line {line}, byte {e.start})")
        return data.decode("utf-8", errors="replace")


def finite_copy(obj: object, where: str = "") -> tuple[object, list[str]]:
    """``obj`` with every NaN or infinite float replaced by None (strict JSON has neither), and the dotted
    paths where that was done."""
    found: list[str] = []

    def walk(o: object, path: str) -> object:
        if isinstance(o, float) and not math.isfinite(o):
            found.append(path or ".")
            return None
        if isinstance(o, dict):
            return {k: walk(v, f"{path}.{k}" if path else str(k)) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return [walk(v, f"{path}[{i}]") for i, v in enumerate(o)]
        return o

    return walk(obj, where), found

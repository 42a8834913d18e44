"""The one reader of the YAML and JSON files a user hands numalab: topology and matrix specs, run
options, run records (manifests) and the matrix's own bookkeeping files.

Such a file may come from a colleague or from CI, so it is read as untrusted input. Every reader
here returns plain data (dicts, lists, strings, numbers, booleans, None) or raises a one-line
:class:`LabError` naming the user's path, never another exception and never a hang:

- the file's size is capped (:data:`MAX_SPEC_BYTES` for YAML specs, :data:`MAX_JSON_BYTES` for
  JSON) and checked before it is read;
- a mapping that gives one key twice is refused, naming the key and its line (YAML) or the line
  where the object starts (JSON): the last one silently winning hides a mistake;
- nesting is bounded (:data:`MAX_DEPTH`), and so is what YAML anchors and aliases expand to
  (:data:`MAX_YAML_VALUES`), so an "alias bomb" is refused before anything walks it;
- NaN and infinities (YAML ``.nan``/``.inf``, JSON ``NaN``/``Infinity``/``1e999``) are refused;
- numbers too long for Python (over 4,300 digits) and invalid UTF-8 are one-line errors.

The readers of a particular format (lab.topology.model.spec, lab.matrix.definition, lab.run.options,
lab.analysis.record) check the shape and values of what these return.
"""

from __future__ import annotations

import json
import math
import os
from json import decoder, scanner
from pathlib import Path

from lab.errors import LabError
from lab.untrusted import finite_hooks

MAX_SPEC_BYTES = 1 << 20  # a YAML spec: the presets are under 2 KiB; PyYAML reads ~1 MiB in seconds
MAX_JSON_BYTES = 64 << 20  # run options, manifests (~20 KiB), the matrix's files
MAX_DEPTH = 64  # nested mappings and lists (a manifest is under 10 deep)
MAX_YAML_VALUES = 200_000  # values a YAML document holds once its aliases are expanded


class _Refused(Exception):
    """A reason to refuse the file (turned into a LabError naming it)."""


_FINITE = finite_hooks(_Refused, "is not a finite number", shown=40)  # no NaN, no infinity (json.loads' hooks)


def read_bytes(path: Path | str, what: str = "", limit: int = MAX_SPEC_BYTES) -> bytes:
    """The bytes of ``path``, refused (one line) past ``limit`` without reading them all."""
    label = f"{what} {path}" if what else str(path)
    try:
        # Opened without blocking: a FIFO nobody writes to reads as empty instead of hanging here.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        os.set_blocking(fd, True)
        with open(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_size > limit:
                raise LabError(f"{label}: {st.st_size:,} bytes, more than the {_size(limit)} such a file may have")
            data = f.read(limit + 1)  # (a pipe or /dev/zero has no size to check first)
    except OSError as err:
        raise LabError(f"{label}: cannot read: {err.strerror or err}") from None
    if len(data) > limit:
        raise LabError(f"{label}: more than the {_size(limit)} such a file may have")
    return data


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def text_of(data: bytes | str, label: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise LabError(f"{label}: not UTF-8 text (line {line})") from None


# --- YAML --------------------------------------------------------------------------------------------


def load_yaml(path: Path | str, what: str = "", limit: int = MAX_SPEC_BYTES) -> object:
    """A YAML file a user gave, as plain data (see the module's docstring for what is refused)."""
    label = f"{what} {path}" if what else str(path)
    return parse_yaml(read_bytes(path, what, limit), label)


def parse_yaml(data: bytes | str, where: str) -> object:
    """YAML text (or UTF-8 bytes) -> plain data; errors are one line starting with ``where``."""
    text = text_of(data, where)
    if len(text) > MAX_SPEC_BYTES:
        raise LabError(f"{where}: more than the {_size(MAX_SPEC_BYTES)} a spec may have")
    import yaml  # (PyYAML is slow to import; most commands read no YAML)

    loader = None
    try:
        loader = _loader_class()(text)  # (reading starts here: a NUL byte is an error already)
        node = loader.get_single_node()
        if node is None:
            return None
        _measure(node)
        return loader.construct_document(node)
    except _Refused as err:
        raise LabError(f"{where}: {err}") from None
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, max(0, err.position)) + 1
        bad = f"character #x{err.character:04x}" if isinstance(err.character, int) else "a character"
        raise LabError(f"{where}: not valid YAML at line {line} ({bad} is not allowed)") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        problem = getattr(err, "problem", None)
        raise LabError(f"{where}: not valid YAML{at}" + (f" ({problem})" if problem else "")) from None
    # e.g. a 5,000-digit number, a date 2024-13-45, an empty '!!float' or '!!int' (PyYAML reads value[0])
    except (ValueError, OverflowError, RecursionError, IndexError) as err:
        raise LabError(f"{where}: {_value_problem(err)}") from None
    finally:
        if loader is not None:
            loader.dispose()


_LOADER: type | None = None


def _loader_class() -> type:
    """yaml.SafeLoader, bounded: nesting, duplicate keys and non-finite floats (built on first use:
    importing PyYAML is slow, and most commands never read YAML)."""
    global _LOADER
    if _LOADER is not None:
        return _LOADER
    import yaml  # (PyYAML is slow to import; most commands read no YAML)
    from yaml.nodes import MappingNode  # (PyYAML is slow to import; most commands read no YAML)

    class Loader(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            super().__init__(stream)
            self.depth = 0

        def compose_node(self, parent, index):  # the composer recurses once per level: bound it first
            self.depth += 1
            try:
                if self.depth > MAX_DEPTH:
                    mark = self.peek_event().start_mark
                    raise _Refused(f"nested more than {MAX_DEPTH} levels deep (line {mark.line + 1})")
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):
            if isinstance(node, MappingNode):
                seen: dict[object, int] = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue  # '<<: *base' then a key of its own: an override, as YAML means it
                    key = self.construct_object(key_node, deep=True)
                    try:
                        first = seen.get(key)
                    except TypeError:
                        continue  # an unhashable key: PyYAML's own error says so
                    line = key_node.start_mark.line + 1
                    if first is not None:
                        raise _Refused(f"duplicate key {_show(key)} at line {line} (first at line {first})")
                    seen[key] = line
            return super().construct_mapping(node, deep=deep)

        def construct_yaml_float(self, node):
            value = super().construct_yaml_float(node)
            if not math.isfinite(value):
                raise _Refused(f"line {node.start_mark.line + 1}: {node.value} is not a finite number")
            return value

    Loader.add_constructor("tag:yaml.org,2002:float", Loader.construct_yaml_float)
    _LOADER = Loader
    return Loader


def _value_problem(err: Exception) -> str:
    if isinstance(err, IndexError):
        return "an empty value tagged as a number (!!int or !!float with nothing after it)"
    text = str(err)
    if "digits" in text and "integer" in text:
        return "a number with more than 4,300 digits"
    return f"cannot read a value: {(text.splitlines() or [type(err).__name__])[0][:120]}"


def _show(key: object) -> str:
    text = repr(key)
    return text if len(text) <= 60 else text[:57] + "..."


def _measure(root) -> None:
    """Refuse a node graph that is nested too deeply or, with its aliases expanded, holds too many
    values (an alias bomb), or that refers to itself; without expanding it."""
    from yaml.nodes import MappingNode, SequenceNode  # (PyYAML is slow to import; most commands read no YAML)

    done: dict[int, tuple[int, int]] = {}  # id(node) -> (values, height), each node measured once
    open_: set[int] = set()

    def visit(node, level: int) -> tuple[int, int]:
        key = id(node)
        if key in open_:
            raise _Refused(f"an alias refers to a node that contains it (line {node.start_mark.line + 1})")
        if key not in done:
            if level > MAX_DEPTH:
                raise _Refused(f"nested more than {MAX_DEPTH} levels deep once aliases are expanded")
            open_.add(key)
            if isinstance(node, SequenceNode):
                children = node.value
            elif isinstance(node, MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = []
            values, height = 1, 0
            for child in children:
                v, h = visit(child, level + 1)
                values += v
                height = max(height, h + 1)
                if values > MAX_YAML_VALUES:
                    raise _Refused(
                        f"more than {MAX_YAML_VALUES:,} values once its aliases are expanded "
                        f"(line {node.start_mark.line + 1})"
                    )
            open_.discard(key)
            done[key] = (values, height)
        values, height = done[key]
        if level + height > MAX_DEPTH:
            raise _Refused(f"nested more than {MAX_DEPTH} levels deep once aliases are expanded")
        return values, height

    visit(root, 0)


# --- JSON --------------------------------------------------------------------------------------------


def load_json(path: Path | str, what: str = "", limit: int = MAX_JSON_BYTES) -> object:
    """A JSON file numalab did not necessarily write itself, as plain data (see the module's docstring)."""
    label = f"{what} {path}" if what else str(path)
    return parse_json(read_bytes(path, what, limit), label)


def parse_json(data: bytes | str, where: str) -> object:
    """JSON text (or UTF-8 bytes) -> plain data; errors are one line starting with ``where``."""
    text = text_of(data, where)
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, **_FINITE)
    except _Duplicate as err:
        line = _object_line(text, err.key)
        at = f" in the object at line {line}" if line else ""
        raise LabError(f"{where}: duplicate key {_show(err.key)}{at}") from None
    except _Refused as err:
        raise LabError(f"{where}: {err}") from None
    except json.JSONDecodeError as err:
        raise LabError(f"{where}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except RecursionError:
        raise LabError(f"{where}: nested more than {MAX_DEPTH} levels deep") from None
    except (ValueError, OverflowError) as err:  # a number of over 4,300 digits
        raise LabError(f"{where}: {_value_problem(err)}") from None
    if _depth(value) > MAX_DEPTH:
        raise LabError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    return value


class _Duplicate(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict:
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for k, _ in pairs:
            if k in seen:
                raise _Duplicate(k)
            seen.add(k)
    return out


def _object_line(text: str, key: str) -> int | None:
    """The line where the object that holds ``key`` twice starts: the text read again by the
    standard library's pure-Python scanner, which knows where each object starts (only on this
    error path: it is slow)."""
    found: list[int] = []

    def parse_object(s_and_end, strict, scan_once, object_hook, object_pairs_hook, memo=None):
        start = s_and_end[1]

        def hook(pairs):
            if not found and [k for k, _ in pairs].count(key) > 1:
                found.append(start)
            return dict(pairs)

        return decoder.JSONObject(s_and_end, strict, scan_once, object_hook, hook, memo)

    dec = json.JSONDecoder()
    dec.parse_object = parse_object  # type: ignore[attr-defined]
    dec.scan_once = scanner.py_make_scanner(dec)
    try:
        dec.decode(text)
    except (ValueError, RecursionError):
        return None
    return text.count("\n", 0, found[0]) + 1 if found else None


def _depth(value: object) -> int:
    """How deeply ``value`` nests (0 for a scalar), without recursion."""
    deepest = 0
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(v, dict):
            stack.extend((c, d + 1) for c in v.values())
        elif isinstance(v, list):
            stack.extend((c, d + 1) for c in v)
    return deepest

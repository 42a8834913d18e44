"""The JSON Schemas of the spec files a user writes (``topology``, ``matrix``, ``workload``:
``lab/schemas/<kind>.schema.json``) and the structural check against them: types, required and unknown fields,
enums and ranges. What needs more than one field or the host (a SLIT's symmetry, node ids 0..n-1, a metric name
that clashes with a built-in, a file that must exist) stays with each loader.

An editor that reads JSON Schema completes and checks a spec file with the same schema (docs/topologies.md,
"Checking a spec as you write it").

A failed check is one :class:`LabError` line naming the field path (``nodes[2].cpus: expected an integer, got
'x'``), the loader prefixing the file. A schema may give a subschema an ``errorMessage`` (ajv-errors' keyword,
which other validators ignore): it replaces the generated wording of a type, pattern, enum or anyOf failure there
(a mapping of keyword -> wording: of those keywords' failures).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lab.errors import LabError

SCHEMA_DIR = Path(__file__).parent
KINDS = ("topology", "matrix", "workload")
# The failures an ``errorMessage`` words; a missing or unknown field, a range and a list's length keep the generated
# wording.
_WORDED = {"type", "pattern", "enum", "const", "anyOf", "oneOf", "not", "propertyNames", "minProperties",
           "maxProperties"}  # fmt: skip
_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
               "array": "a list", "object": "a mapping", "null": "nothing"}  # fmt: skip


def schema_path(kind: str) -> Path:
    """The file of the schema ``kind`` (one of :data:`KINDS`)."""
    if kind not in KINDS:
        raise LabError(f"schema {kind!r}: no such schema (known: {', '.join(KINDS)})")
    return SCHEMA_DIR / f"{kind}.schema.json"


@functools.cache
def load_schema(kind: str) -> dict[str, Any]:
    return json.loads(schema_path(kind).read_text())


@functools.cache
def _validator(kind: str, definition: str) -> Any:
    import jsonschema  # (on use: a spec read from numalab's parsed-spec cache was checked when it was cached)

    schema = load_schema(kind)
    validator = jsonschema.validators.validator_for(schema)(schema)
    if not definition:
        return validator
    if definition not in schema.get("$defs", {}):
        raise LabError(f"schema {kind}: no definition {definition!r}")
    return validator.evolve(schema=schema["$defs"][definition])  # (its $refs still resolve in the whole schema)


def check(data: object, kind: str, definition: str = "") -> dict[str, Any]:
    """``data`` (a parsed spec file) against the schema ``kind`` (or its ``$defs`` entry ``definition``: the
    workload schema's ``builtin``, a built-in workload's file): returned as it is (every spec is a mapping)
    if it passes, else the most relevant failure as a one-line LabError ``PATH: what is wrong`` (the caller
    prefixes the file)."""
    from jsonschema.exceptions import best_match  # (on use: see _validator)

    error = best_match(_validator(kind, definition).iter_errors(data))
    if error is not None:
        raise LabError(_message(error, data))
    return data  # type: ignore[return-value]


def _path(keys: Iterable[Any], data: object) -> str:
    """``nodes[2].cpus``: list indexes in brackets, mapping keys (an integer one too) after dots."""
    out = ""
    node = data
    for key in keys:
        out += f"[{key}]" if isinstance(node, list) else f".{key}" if out else str(key)
        try:
            node = node[key]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            node = None
    return out


def _shown(value: object) -> str:
    """A value for a message: a mapping or a list by its kind (it may be long), anything else by its repr."""
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _worded(error: Any) -> str | None:
    """The ``errorMessage`` that words this failure: its own subschema's, or (a type failure of one branch of an
    anyOf/oneOf) the nearest enclosing subschema's at the same place. As in ajv-errors, an ``errorMessage`` that
    is a mapping words only the keywords it names, and only its own subschema's failures (a range, say)."""
    node = error
    while node is not None:
        message = node.schema.get("errorMessage") if isinstance(node.schema, dict) else None
        if isinstance(message, dict) and node is error and error.validator in message:
            return message[error.validator]
        if isinstance(message, str) and error.validator in _WORDED:
            return message
        if error.validator not in _WORDED:
            return None
        parent = node.parent
        if parent is None or list(parent.absolute_path) != list(error.absolute_path):
            return None
        node = parent
    return None


def _message(error: Any, data: object) -> str:  # noqa: C901 (one wording per JSON Schema keyword)
    keys = list(error.absolute_path)
    if "propertyNames" in error.absolute_schema_path:  # (the failing value is a key: name it in the path)
        keys.append(error.instance)
    where = _path(keys, data)
    value, arg = error.instance, error.validator_value
    worded = _worded(error)
    if error.validator == "required":
        missing = next(k for k in arg if not isinstance(value, dict) or k not in value)
        return f"{_path([*keys, missing], data)}: missing"
    if error.validator == "additionalProperties":
        known = list(error.schema.get("properties", {}))  # (in the schema's order, the docs')
        extra = sorted(str(k) for k in value if k not in known)
        hint = f" (known: {', '.join(known)})" if known else ""
        return f"{_path([*keys, extra[0]], data)}: unknown field{hint}"
    if worded is not None:  # (", got a mapping" says nothing when a mapping of the wrong shape is the matter)
        shape_only = isinstance(value, (dict, list)) and error.validator != "type"
        what = worded if shape_only else f"{worded}, got {_shown(value)}"
    elif error.validator == "type":
        types = [arg] if isinstance(arg, str) else arg
        what = f"expected {' or '.join(_TYPE_WORDS.get(t, t) for t in types)}, got {_shown(value)}"
    elif error.validator == "enum":
        what = f"expected one of {', '.join(str(v) for v in arg)}, got {_shown(value)}"
    elif error.validator in ("minimum", "maximum", "exclusiveMinimum"):
        lo, hi = error.schema.get("minimum"), error.schema.get("maximum")
        if lo is not None and hi is not None:
            what = f"must be from {lo} to {hi}, got {_shown(value)}"
        elif error.validator == "exclusiveMinimum":
            what = f"must be more than {arg}, got {_shown(value)}"
        else:
            what = f"must be {'>=' if error.validator == 'minimum' else '<='} {arg}, got {_shown(value)}"
    elif error.validator == "minItems":
        what = "empty (give at least one)" if arg == 1 else f"expected at least {arg} entries, got {len(value)}"
    elif error.validator == "maxItems":
        what = f"at most {arg} entries, got {len(value)}"
    elif error.validator == "minLength":
        what = "must not be empty" if arg == 1 else f"at least {arg} characters, got {_shown(value)}"
    elif error.validator == "maxLength":
        what = f"at most {arg} characters, got {_shown(value)}"
    elif error.validator in ("minProperties", "maxProperties"):
        what = f"expected {'at least' if error.validator == 'minProperties' else 'at most'} {arg} field(s)"
    else:  # (pattern, anyOf, ... without an errorMessage: the library's own wording)
        what = error.message
    return f"{where}: {what}" if where else what

"""A workload's output read into its figures (:func:`parse_output`): its JSON result line, its parser's or a
reader's, or a user's as its spec says. The output is the guest's, so untrusted: read with lab.untrusted, never
raising, anything not what the workload writes a ``{"parse_error": why}``."""

from __future__ import annotations

import functools
import json
import math

from lab.errors import LabError
from lab.untrusted import guest_json, shown, to_float
from lab.workloads.workload_type import RESULT_KEY, UserSpec, Workload, is_number


def check_result(workload: Workload, result: object) -> str | None:
    """What is wrong with a result line's value (None if nothing): it must be a JSON object whose declared
    figures (``workload.metrics``) are finite numbers."""
    mark = workload.result_prefix.strip()
    if not isinstance(result, dict):
        return f"{mark} is a JSON {type(result).__name__}, not an object"
    for key in (m.name for m in workload.metrics):
        if key not in result:
            return f"{mark} has no {key}"
        if not is_number(result[key]):
            return f"{mark} {key} is {shown(json.dumps(result[key])[:60], 60)}, not a finite number"
    return None


def _finite(result: dict) -> dict:
    """A parser's figures, or a parse error when one is out of range: a mean or sum of huge guest numbers
    can overflow to inf, which no comparison may take for a figure."""
    bad = [k for k, v in result.items() if isinstance(v, float) and not math.isfinite(v)]
    return {"parse_error": f"the workload output gives {bad[0]} out of range"} if bad else result


def parse_output(workload: Workload, stdout: str) -> dict:
    """The workload's own figures: its result line, its parser's or a user's. Never raises: output that is
    not what the workload writes (the guest is untrusted) gives ``{"parse_error": why}``, and nothing of it
    is kept that compare could take for a figure."""
    if workload.user is not None:
        return parse_user(workload.user, stdout)
    if workload.parse is not None:
        return _finite(workload.parse(stdout))
    prefix, mark = workload.result_prefix, workload.result_prefix.strip()
    for line in reversed(stdout.splitlines()):
        if line.startswith(prefix):
            try:
                result = guest_json(line[len(prefix) :])
            except ValueError as e:
                return {"parse_error": f"{mark} line: {e}"}
            wrong = check_result(workload, result)
            return {"parse_error": wrong} if wrong else result  # type: ignore[return-value]
    return {"parse_error": f"no {mark} line in the workload output"}


def user_pattern(pattern: str):
    """A user's result pattern compiled by RE2 (``google-re2``), which matches in time linear in the text: the
    text is the untrusted guest's, and a pattern that backtracks (``^(a+)+$``) must not hang the host as
    Python's ``re`` would. ``^`` and ``$`` match at every line. Raises ValueError with RE2's one-line reason
    for a pattern RE2 cannot run (backreferences, lookaround) or that is too large."""
    try:
        import re2  # (a compiled dependency: missing, it is a one-line error below)
    except ImportError:  # (a dependency: make setup installs it)
        raise LabError("results.regex: needs the google-re2 package (make setup, or pip install google-re2)") from None
    options = re2.Options()
    options.log_errors = False  # (RE2 would print its complaint to stderr as well)
    try:
        return re2.compile(f"(?m){pattern}", options)
    except re2.error as e:
        why = e.args[0] if e.args else e
        raise ValueError(why.decode(errors="replace") if isinstance(why, bytes) else str(why)) from None
    except (TypeError, ValueError) as e:
        raise ValueError(str(e)) from None


MAX_RESULT_METRICS = 256  # a --workload-cmd result's figures taken as metrics
REGEX_SCAN_CHARS = 1 << 20  # results: regex reads the last MiB of the workload's output


def parse_user(spec: UserSpec, stdout: str) -> dict:
    """A user's workload's figures: its JSON line (the last one with the prefix) or one number per regex (its
    last match). Every declared metric must be there and a finite number (checked as the built-ins' are), or
    the result is ``{"parse_error": why}`` and the run ``workload-failed``."""
    if spec.json_prefix:
        line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith(spec.json_prefix)), None)
        if line is None:
            return {"parse_error": f"no line starting with {shown(spec.json_prefix, 40)} in the workload output"}
        try:
            result = guest_json(line[len(spec.json_prefix) :])
        except ValueError as e:
            return {"parse_error": f"{spec.json_prefix.strip()} line: {e}"}
        if not isinstance(result, dict):
            return {
                "parse_error": f"the {spec.json_prefix.strip()} line is a JSON {type(result).__name__}, not an object"
            }
        for m in spec.metrics:
            if m.name not in result:
                return {"parse_error": f"the result has no {m.name}"}
            if not is_number(result[m.name]):
                return {"parse_error": f"the result's {m.name} is {shown(json.dumps(result[m.name])[:60], 60)}, "
                        "not a finite number"}  # fmt: skip
        if spec.all_numeric:
            nums = [k for k, v in result.items() if is_number(v) and RESULT_KEY.fullmatch(k)]
            if not nums:
                return {"parse_error": "the result has no number to compare"}
            if len(nums) > MAX_RESULT_METRICS:
                return {"parse_error": f"the result has {len(nums)} numbers, more than {MAX_RESULT_METRICS}"}
        return result
    out: dict = {}
    tail = stdout[-REGEX_SCAN_CHARS:]  # (the guest writes the text the user's patterns run over: bounded)
    for name, pattern in spec.regex:
        # (RE2: linear in the tail, whatever the pattern; the last match wins)
        last = functools.reduce(lambda _prev, m: m, user_pattern(pattern).finditer(tail), None)
        if last is None:
            return {"parse_error": f"{name}: no match for {shown(pattern, 60)} in the workload output"}
        value = to_float(last.group(1) or "")
        if value is None:
            return {"parse_error": f"{name}: {shown(last.group(1) or '', 60)} is not a finite number"}
        out[name] = value
    return out

"""Workloads: what a run's workload is (:class:`Workload`) and how its output is read (:func:`parse_output`).

The built-ins are one folder each, ``lab/workloads/NAME/`` (lab.workloads.registry reads them: the workload
file, its scaling and parser hooks); a user's workload is a workload file or ``--workload-cmd``
(lab.guest.user_workload). Both end up as a :class:`Workload`: its command scaled to the VM, what the guest
image must carry to run it (``programs``, ``tools``; lab.guest.image lays exactly those over its base), the
figures compare reads as metrics, and its output's reader: a JSON result line (the built-ins' own programs'
``NUMALAB_RESULT``, a user's ``json-line``), a user's regular expressions, or a built-in's ``parse.py``.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.errors import LabError
from lab.guest import workload_metrics as wm
from lab.topology.model import Topology
from lab.untrusted import guest_json, shown, to_float

# Share of guest memory a workload may touch: TCG is slow and the guest
# kernel, initramfs and trace buffers need the rest.
MEM_SHARE = 0.35


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    command: Callable[[Topology, float], str]
    # How its output is read: "lab" (a JSON result line, NUMALAB_RESULT for numalab's own programs), "tool"
    # (a built-in's parse.py: a host tool's own output) or "user" (a user's workload, read as its spec says).
    kind: str
    # What the guest image must carry to run it (lab.guest.image): our own static programs, built from
    # images/workloads, and host tools (lab.guest.image.GUEST_TOOLS), each with its library closure.
    programs: tuple[str, ...] = field(kw_only=True)
    tools: tuple[str, ...] = field(default=(), kw_only=True)
    # The figures of its result that compare reads as metrics ("workload.<name>"; lab.analysis.metrics builds
    # its registry from these). A JSON result (kind "lab") must give each as a finite number.
    metrics: tuple[wm.WorkloadMetric, ...] = field(default=(), kw_only=True)
    # A user's workload (kind "user": a workload file or --workload-cmd, lab.guest.user_workload): what it
    # carries into the guest, how its output is read and which metrics it declares. None for the built-ins.
    user: UserSpec | None = field(default=None, kw_only=True)
    # Kind "tool": its folder's parser (lab.workloads.registry); kind "lab": its result line's prefix.
    parse: Callable[[str], dict] | None = field(default=None, kw_only=True, compare=False)
    result_prefix: str = field(default="NUMALAB_RESULT ", kw_only=True)
    folder: str = field(default="", kw_only=True)  # a built-in's folder (lab/workloads/NAME), for show


@dataclass(frozen=True)
class UserMetric:
    """A metric a user's workload declares: compared as ``workload.<name>`` (lab.analysis.metrics)."""

    name: str
    unit: str = ""
    higher_is_better: bool = True
    mean: str = "amean"  # amean or hmean (rates)
    min_effect: float | None = None  # percent of the baseline's central value (lab.min_effect); None: the default

    @property
    def twin_key(self) -> str | None:
        """Its per-vCPU-second twin's name when its unit is a rate (lab.analysis.metrics.per_vcpu_second)."""
        return wm.twin_name(self.name) if wm.is_rate_unit(self.unit) else None

    def to_dict(self) -> dict:
        out = {"name": self.name, "unit": self.unit, "better": "higher" if self.higher_is_better else "lower",
               "mean": self.mean}  # fmt: skip
        return out if self.min_effect is None else out | {"min_effect": self.min_effect}


@dataclass(frozen=True)
class UserSpec:
    """A user's workload, read and checked on the host before any boot (lab.guest.user_workload)."""

    source: str  # the workload file's path, or "--workload-cmd"
    sha256: str  # of the workload file's bytes (--workload-cmd: of the command and its files' contents)
    template: str  # the command, with {cpus} {nodes} {mem_mib} {duration} not yet filled in
    files: tuple[tuple[str, str], ...]  # (host path, name in the guest's /workload)
    tools: tuple[str, ...]  # host binaries, copied to the same path with their shared-library closure
    packages: tuple[str, ...]  # the Debian packages whose programs are among the tools
    json_prefix: str = ""  # results: a line starting with this, then a JSON object
    regex: tuple[tuple[str, str], ...] = ()  # results: (metric, pattern with one group)
    metrics: tuple[UserMetric, ...] = ()
    all_numeric: bool = False  # --workload-cmd: every numeric key of the JSON object is a metric (higher is better)

    def record(self) -> dict:
        """What the manifest says about it (``workload.spec``)."""
        return {
            "source": self.source,
            "sha256": self.sha256,
            "command": self.template,
            "files": [guest for _, guest in self.files],
            "tools": list(self.tools),
            "packages": list(self.packages),
            "results": {"json-line": self.json_prefix} if self.json_prefix else {"regex": dict(self.regex)},
        }

    def declarations(self, result: dict | None) -> list[dict]:
        """The metrics the run's record declares: the file's, or (--workload-cmd) every finite number of the
        result, higher being better."""
        if not self.all_numeric:
            return [m.to_dict() for m in self.metrics]
        nums = sorted(k for k, v in (result or {}).items() if _is_number(v) and RESULT_KEY.fullmatch(k))
        return [UserMetric(k).to_dict() for k in nums]


# A user's metric name (and a --workload-cmd result key taken as a metric): a word of up to 64 characters.
RESULT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def check_result(workload: Workload, result: object) -> str | None:
    """What is wrong with a result line's value (None if nothing): it must be a JSON object whose declared
    figures (``workload.metrics``) are finite numbers."""
    mark = workload.result_prefix.strip()
    if not isinstance(result, dict):
        return f"{mark} is a JSON {type(result).__name__}, not an object"
    for key in (m.name for m in workload.metrics):
        if key not in result:
            return f"{mark} has no {key}"
        if not _is_number(result[key]):
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
            if not _is_number(result[m.name]):
                return {"parse_error": f"the result's {m.name} is {shown(json.dumps(result[m.name])[:60], 60)}, "
                        "not a finite number"}  # fmt: skip
        if spec.all_numeric:
            nums = [k for k, v in result.items() if _is_number(v) and RESULT_KEY.fullmatch(k)]
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

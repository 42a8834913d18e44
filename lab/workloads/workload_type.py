"""What a run's workload is: the :class:`Workload` type, and a user's workload as read on the host
(:class:`UserSpec`, its :class:`UserMetric` declarations).

The built-ins are one folder each, ``lab/workloads/NAME/`` (lab.workloads.registry reads them: the workload
file, its scaling and parser hooks); a user's workload is a workload file or ``--workload-cmd``
(lab.workloads.user_workload). Both end up as a :class:`Workload`: its command scaled to the VM, what the guest
image must carry to run it (``programs``, ``tools``; lab.workloads.image_layers hands exactly those to
lab.guest.image), the figures compare reads as metrics, and its output's reader (lab.workloads.workload_output):
a JSON result line (the built-ins' own programs' ``NUMALAB_RESULT``, a user's ``json-line``), a user's regular
expressions, a built-in's ``parse.py`` or a reader it names (lab.workloads.output_readers.READERS).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from lab.topology.model.topology import Topology
from lab.workloads import metric_declarations as wm

# Share of guest memory a workload may touch: TCG is slow and the guest
# kernel, initramfs and trace buffers need the rest.
MEM_SHARE = 0.35


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    command: Callable[[Topology, float], str]
    # How its output is read: "lab" (a JSON result line, NUMALAB_RESULT for numalab's own programs), "tool"
    # (a built-in's parse.py or named reader: a host tool's own output) or "user" (a user's workload, read as
    # its spec says).
    kind: str
    # What the guest image must carry to run it (lab.workloads.image_layers): our own static programs, built from
    # images/workloads, and host tools (lab.workloads.image_layers.GUEST_TOOLS), each with its library closure.
    programs: tuple[str, ...] = field(kw_only=True)
    tools: tuple[str, ...] = field(default=(), kw_only=True)
    # The figures of its result that compare reads as metrics ("workload.<name>"; lab.analysis.metrics builds
    # its registry from these). A JSON result (kind "lab") must give each as a finite number.
    metrics: tuple[wm.WorkloadMetric, ...] = field(default=(), kw_only=True)
    # A user's workload (kind "user": a workload file or --workload-cmd, lab.workloads.user_workload): what it
    # carries into the guest, how its output is read and which metrics it declares. None for the built-ins.
    user: UserSpec | None = field(default=None, kw_only=True)
    # Kind "tool": its folder's parser or the reader it names (lab.workloads.registry); kind "lab": its result
    # line's prefix.
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
    """A user's workload, read and checked on the host before any boot (lab.workloads.user_workload)."""

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
        nums = sorted(k for k, v in (result or {}).items() if is_number(v) and RESULT_KEY.fullmatch(k))
        return [UserMetric(k).to_dict() for k in nums]


# A user's metric name (and a --workload-cmd result key taken as a metric): a word of up to 64 characters.
RESULT_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


def is_number(v: object) -> bool:
    """A finite int or float (not a bool): what a figure of a result must be."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)

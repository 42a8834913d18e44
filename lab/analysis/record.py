"""A run record on disk, as the analyses see it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from lab.analysis.plausible import record_problems
from lab.analysis.scheduler_class import SchedulerInfo, scheduler_of
from lab.datafile import load_json
from lab.errors import LabError
from lab.record_files import MANIFEST, RUN_FORMAT
from lab.topology.model.topology import Topology, topology_from_dict

# The fields the analyses and reports read, and their types (None: may be null).
_SHAPE: dict[str, tuple[type, ...]] = {
    "run_id": (str,),
    "status": (str,),
    "reason": (str,),
    "topology": (dict,),
    "kernel": (dict,),
    "workload": (dict,),
    "settings": (dict,),
    "accelerator": (dict,),
    "timings": (dict,),
    "metrics": (dict,),
    "stages": (list,),
}
_SHAPE_IN = {"kernel": {"name": (str,)}, "workload": {"name": (str,)}, "accelerator": {"name": (str,)}}


def _shape_problem(manifest: dict) -> str | None:
    """What is missing or of the wrong type in a manifest, or None."""
    for key, types in _SHAPE.items():
        if not isinstance(manifest.get(key), types):
            return f"'{key}' is missing or not a {types[0].__name__}"
    for key, fields in _SHAPE_IN.items():
        for sub, types in fields.items():
            if not isinstance(manifest[key].get(sub), types):
                return f"'{key}.{sub}' is missing or not a {types[0].__name__}"
    if not all(isinstance(s, dict) for s in manifest["stages"]):
        return "'stages' holds something other than mappings"
    return None


def load_manifest(mf: Path) -> dict:
    """A run record's manifest.json, read with lab.datafile's bounded reader (a record may come from CI or
    a colleague): a JSON object whose ``format`` is the one this numalab reads, or a one-line error."""
    manifest = load_json(mf)
    fmt = manifest.get("format") if isinstance(manifest, dict) else None
    if not isinstance(fmt, str) or not fmt.startswith("numalab-run/"):
        raise LabError(f"{mf}: not a numalab run manifest (no 'format: {RUN_FORMAT}')")
    if fmt != RUN_FORMAT:
        raise LabError(f"{mf}: format {fmt[:40]!r}: this numalab reads {RUN_FORMAT} records only")
    assert isinstance(manifest, dict)
    return rechecked(manifest, mf.parent)


_said: set[str] = set()  # the run directories whose failed re-check was said (once each per process)


def rechecked(manifest: dict, run_dir: Path) -> dict:
    """A record marked ``ok`` is held to the checks its run made before writing it (lab.analysis.plausible.
    record_problems): one edited by hand or written by another tool may not have been through them. One that
    fails comes back as a run marked ``implausible`` would (its status and reason replaced, the problems in
    ``record_problems``; the file is not changed), so compare, the report, the matrix and bisect leave it out
    unless asked (--include-status implausible); a warning line on stderr names the run and the field."""
    if manifest.get("status") != "ok" or not (problems := record_problems(manifest)):
        return manifest
    if str(run_dir) not in _said:
        _said.add(str(run_dir))
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        logging.getLogger("numalab").warning(
            f"{run_dir}: marked ok, but {problems[0]}{more}: read as implausible, as its run would have marked it"
        )
    reason = f"the record fails a check its run makes: {problems[0]}"
    return manifest | {"status": "implausible", "reason": reason, "record_problems": problems}


@dataclass
class RunRecord:
    path: Path
    manifest: dict

    @classmethod
    def load(cls, path: Path | str) -> RunRecord:
        path = Path(path)
        mf = path / MANIFEST
        if not path.is_dir():
            raise LabError(f"{path}: not a directory (expected a numalab run record)")
        if not mf.exists():
            hint = " (an unfinished run: it was interrupted)" if path.name.endswith(".partial") else ""
            raise LabError(f"{path}: not a numalab run (no manifest.json){hint}")
        manifest = load_manifest(mf)
        problem = _shape_problem(manifest)
        if problem:
            raise LabError(f"{mf}: not a numalab run manifest ({problem})")
        record = cls(path, manifest)
        try:
            record.topology  # noqa: B018 (checked now, so a bad one is named here)
        except (LabError, KeyError, TypeError, ValueError) as err:
            raise LabError(f"{mf}: topology: {err}") from None
        try:
            record.scheduler  # noqa: B018 (the same for the scheduler it names)
        except LabError as err:
            raise LabError(f"{mf}: {err}") from None
        return record

    @cached_property
    def topology(self) -> Topology:
        return topology_from_dict(self.manifest["topology"])

    # Typed accessors: what the analyses and reports read, so that the manifest's layout
    # (lab.run.manifest, tests/golden/record/manifest.shape) is spelled out here and not at every use.
    # Those load() checks (_SHAPE) are plain lookups; the rest tolerate records made before the key existed.

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def status(self) -> str:
        return self.manifest["status"]

    @property
    def reason(self) -> str:
        return self.manifest["reason"]

    @property
    def label(self) -> str:
        return self.manifest.get("label", "")

    @property
    def kernel_name(self) -> str:
        return self.manifest["kernel"]["name"]

    @property
    def workload_name(self) -> str:
        return self.manifest["workload"]["name"]

    @property
    def workload_duration_s(self) -> float | None:
        return self.manifest["workload"].get("duration_s")

    @property
    def workload_result(self) -> dict:
        """The workload's parsed output ({} if it printed none that parsed)."""
        return self.manifest["workload"].get("result") or {}

    @property
    def accelerator(self) -> str:
        """ "kvm" or "tcg"."""
        return self.manifest["accelerator"]["name"]

    @property
    def settings(self) -> dict:
        return self.manifest["settings"]

    @property
    def numa_balancing(self) -> str | None:
        """The kernel.numa_balancing the plan set ("0", "1", "2"), None for the kernel's default."""
        return self.settings.get("numa_balancing")

    @cached_property
    def scheduler(self) -> SchedulerInfo:
        """The scheduler the workload ran under (lab.analysis.scheduler_class): the fair class where the record
        names none."""
        return scheduler_of(self.manifest)

    @property
    def knobs(self) -> dict[str, str]:
        return self.settings.get("knobs") or {}

    @property
    def trace_events(self) -> tuple[str, ...]:
        """The events the run traced, as system:name."""
        return tuple(self.settings.get("trace_events", []))

    @property
    def timings(self) -> dict:
        return self.manifest["timings"]

    @property
    def metrics(self) -> dict:
        return self.manifest["metrics"]

    @property
    def stages(self) -> list[dict]:
        return self.manifest["stages"]

    def stage_uptime(self, name: str) -> float | None:
        """The guest's uptime at a stage mark (workload-start, ...), None if the run never reached it."""
        return next((s["uptime"] for s in self.stages if s["name"] == name), None)

    @property
    def workload_start_uptime(self) -> float | None:
        return self.stage_uptime("workload-start")

    @property
    def marked_incomplete(self) -> bool:
        """The manifest says the trace lost over 1% of its records (lab.analysis.lost)."""
        return bool(self.manifest.get("trace_incomplete"))

    @property
    def access_matrix(self) -> dict | None:
        """--access-matrix's section, None for a run without the plugin."""
        return self.manifest.get("access_matrix")

    def file(self, name: str) -> Path:
        return self.path / name

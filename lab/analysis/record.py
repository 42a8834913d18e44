"""A run record on disk, as the analyses see it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from lab.errors import LabError
from lab.topology.model import Topology, topology_from_dict


@dataclass
class RunRecord:
    path: Path
    manifest: dict

    @classmethod
    def load(cls, path: Path | str) -> RunRecord:
        path = Path(path)
        mf = path / "manifest.json"
        if not path.is_dir():
            raise LabError(f"{path}: not a directory (expected a numalab run record)")
        if not mf.exists():
            hint = " (an unfinished run: it was interrupted)" if path.name.endswith(".partial") else ""
            raise LabError(f"{path}: not a numalab run (no manifest.json){hint}")
        try:
            manifest = json.loads(mf.read_text())
        except json.JSONDecodeError as err:
            raise LabError(f"{mf}: not valid JSON (line {err.lineno})") from None
        if not str(manifest.get("format", "")).startswith("numalab-run/"):
            raise LabError(f"{mf}: not a numalab run manifest (no 'format: numalab-run/…')")
        return cls(path, manifest)

    @cached_property
    def topology(self) -> Topology:
        return topology_from_dict(self.manifest["topology"])

    @property
    def run_id(self) -> str:
        return self.manifest["run_id"]

    @property
    def status(self) -> str:
        return self.manifest["status"]

    @property
    def kernel_name(self) -> str:
        return self.manifest["kernel"]["name"]

    @property
    def workload_start_uptime(self) -> float | None:
        return next((s["uptime"] for s in self.manifest.get("stages", []) if s["name"] == "workload-start"), None)

    def file(self, name: str) -> Path:
        return self.path / name

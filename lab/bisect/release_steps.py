"""The real runner of a bisect over a scheduler's releases (lab.bisect.releases): each release built from crates.io
(lab.host.scx_release, cached) and run in a VM on the bisect's one kernel (lab.run.execute), one record a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from lab.bisect.releases import ReleaseRange
from lab.host import scx_release
from lab.run.batch import requests_from_options
from lab.run.execute import execute
from lab.run.options import RunOptions


class ReleaseStepRunner:
    """Builds ``CRATE@VERSION`` (or finds it in numalab's scx cache) and runs it as ``--scheduler 'CRATE@VERSION
    ARGS'`` on ``kernel`` with ``template``'s options (its kernels, schedulers and out are replaced)."""

    def __init__(self, rng: ReleaseRange, kernel: str, template: RunOptions, progress: Callable[[str], None]) -> None:
        self.rng, self.kernel, self.template, self.progress = rng, kernel, template, progress

    def build(self, version: str) -> float:
        built = scx_release.build(self.rng.crate, version, say=self.progress)
        how = "cache hit" if built.cached else f"built in {built.meta.get('build_s', built.seconds):.0f}s"
        self.progress(f"{self.rng.crate} {version}: {how} ({built.binary})")
        return built.seconds

    def run(self, version: str, out: Path) -> dict:
        opts = replace(self.template, kernels=(self.kernel,), schedulers=(self.rng.spec(version),), out=out, repeat=1)
        (req,) = requests_from_options(opts, self.progress)
        _, manifest = execute(req, self.progress)
        return manifest

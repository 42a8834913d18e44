"""The real step runner: prefix k of a series built on a source (lab.kernel.build, cached), and VM runs of it
(lab.run.execute), one record each."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from lab.kernel.build import BuildRequest, build_kernel
from lab.kernel.cache import find_built
from lab.kernel.fragments import load_fragments
from lab.kernel.patches import Patch, load_patches
from lab.kernel.source import resolve_source
from lab.run.batch import requests_from_options
from lab.run.execute import execute
from lab.run.options import RunOptions


def series_patches(series: str) -> list[Patch]:
    """The series' patches, read and checked (one-line errors naming --series)."""
    return load_patches(None, series)


class KernelStepRunner:
    """Builds prefix k as ``bisect-<digest>-p<k>`` (the digest of the source identity and the k patches, so two
    bisects never re-point each other's names) and runs it with ``template``'s options (its kernels and out
    are replaced)."""

    def __init__(self, source: str | None, series: str, fragments: list[str] | None, template: RunOptions,
                 progress: Callable[[str], None]) -> None:  # fmt: skip
        self.patches = series_patches(series)
        self.fragments = load_fragments(fragments, True)
        self.source_arg = source
        self._source = None
        self.template = template
        self.progress = progress

    def _name(self, prefix: int) -> str:
        h = hashlib.sha256(str(self.source_arg).encode())
        for p in self.patches[:prefix]:
            h.update(p.sha256().encode())
        return f"bisect-{h.hexdigest()[:10]}-p{prefix}"

    def build(self, prefix: int) -> str:
        if self._source is None:
            self._source = resolve_source(self.source_arg, self.progress)
        req = BuildRequest(self._source, self.patches[:prefix], self.fragments, self._name(prefix))
        result = build_kernel(req, self.progress)
        how = "cache hit" if result.cached else f"built in {result.seconds:.0f}s"
        self.progress(f"prefix {prefix}: kernel {result.name} ({how})")
        return result.name

    def identity(self, kernel: str) -> str | None:
        """The build-id of a built kernel (the vmlinux its build made)."""
        built = find_built(kernel)
        return built.build_id if built is not None else None

    def run(self, prefix: int, kernel: str, out: Path) -> dict:
        opts = replace(self.template, kernels=(kernel,), out=out, repeat=1)
        (req,) = requests_from_options(opts, self.progress)
        _, manifest = execute(req, self.progress)
        return manifest

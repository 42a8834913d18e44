"""The instruments of the modelled machine, in one shape (issue 67): what the TCG plugin (images/plugins) counts or
charges for a run, each one :class:`Instrument` in a module of its own: the access matrix (lab.run.access_matrix,
``--access-matrix``) and the memory charge with its coherence model (lab.run.remote_latency, ``--remote-latency``,
``--coherence``, by node or by LLC; the model is lab.vm.tcg.latency_model's).

A run holds the instruments its options ask for (lab.run.instrument_set.instruments_of) and goes through them, never
through one's fields: each is checked before a boot (:meth:`Instrument.check`, a one-line error), gives the plugin its
arguments (:meth:`Instrument.plugin_args`; lab.vm.tcg.access_plugin builds the plugin and its one ``-plugin``), and
after the run puts its counts into the record (:meth:`Instrument.collect`: its section of the manifest, under its
``key``, and its files). The plugin is one for all of them, so its address map and its build are not an instrument's.

Why here, in lab/run/, and not beside the plugin in lab/vm/tcg/: an instrument's record is read with lab.analysis
(lab.analysis.access_counts), a layer above lab/vm/; the mechanisms it configures (the plugin, the models) stay there.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from lab.paths import json_text
from lab.vm.qemu.emulator import Emulator
from lab.vm.tcg.access_plugin import AccessPlugin


@dataclass(frozen=True)
class Plan:
    """What an instrument is checked against before a boot: the accelerator (None: not known yet, --accel auto),
    the backend and its libvirt URI, the guest's clock, and the QEMU binary (None: not known yet)."""

    accel: str | None
    backend: str
    uri: str = ""
    clock: str = "host"
    emulator: Emulator | None = None


@dataclass(frozen=True)
class Window:
    """When the workload ran, for an instrument's counts: the host's monotonic stamps of its start and end marks
    (None: not seen), its seconds by the guest's clock (None: not known), and whether that clock counts
    instructions (--clock virtual: it follows no host clock)."""

    start_ns: int | None = None
    end_ns: int | None = None
    guest_s: float | None = None
    virtual: bool = False


@dataclass(frozen=True)
class InstrumentResult:
    """What an instrument's counts say about one run, for the manifest (lab.run.manifest)."""

    key: str  # its section of the manifest: manifest[key] = section
    section: dict
    files: tuple[str, ...]  # written into the run record
    failure: tuple[str, str] | None  # (status, reason) that fails an otherwise good run


class Instrument(Protocol):
    """One instrument of the modelled machine (this module's docstring)."""

    @property
    def key(self) -> str:
        """Its section of the manifest (``access_matrix``, ``remote_latency``)."""
        ...

    @property
    def from_workload(self) -> bool:
        """Whether it starts at the workload's start (the guest's init runs numalab-model-start just before it)."""
        ...

    @property
    def host_time_scale(self) -> float:
        """How many times the host time a guest second may take under --clock virtual it multiplies (1: none; the
        run's timeout: lab.run.request)."""
        ...

    def check(self, plan: Plan) -> None:
        """A one-line LabError for what this run cannot have, before anything is built or booted."""
        ...

    def plugin_args(self, workdir: Path) -> list[str]:
        """Its arguments to the plugin (KEY=VALUE, before ``,,`` quoting), its counts going to a file in
        ``workdir``."""
        ...

    def collect(self, record_dir: Path, plugin: AccessPlugin, window: Window) -> InstrumentResult:
        """Its counts (in ``plugin.workdir``) copied into the record and read: its section of the manifest."""
        ...


def keep_counts(output: Path | None, dest: Path) -> None:
    """The plugin's file, copied into the run record (when the plugin wrote one)."""
    if output is not None and output.exists():
        shutil.copyfile(output, dest)


def record_section(
    run_dir: Path, key: str, section: dict, problem: str | None, status: str, files: tuple[str, str]
) -> InstrumentResult:
    """The instrument's section of the manifest with its ``problem`` (None: none), written to the record's JSON
    file (``files``: the raw counts', the JSON's); a problem fails an otherwise good run with ``status``."""
    raw_file, json_file = files
    section["problem"] = problem
    (run_dir / json_file).write_text(json_text(section, indent=1) + "\n")
    written = (json_file, *((raw_file,) if (run_dir / raw_file).exists() else ()))
    return InstrumentResult(key, section, written, (status, problem) if problem else None)


def section_lines(manifest: dict, key: str, label: str, line: Callable[[dict], str]) -> list[str]:
    """The run summary's line for the instrument's section ``key`` of the manifest: none without it, its
    problem if it has one, else ``line(section)``."""
    section = manifest.get(key)
    if not section:
        return []
    if section.get("problem"):
        return [f"  {label}: {section['problem']}"]
    return [line(section)]

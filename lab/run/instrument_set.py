"""The instruments a run has (lab.run.instrument), gone through as one: made from the run's options, checked, their
plugin built, their counts collected, their summary lines. The one place that names each instrument: a new one is
its module and a line in :func:`instruments_of` and :data:`SUMMARIES` (and its options, a piece of
lab.run.options.RunOptions, if it has flags)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from lab.run import access_matrix, remote_latency
from lab.run.instrument import Instrument, InstrumentResult, Plan, Window
from lab.run.options import RunOptions
from lab.topology.model.topology import Topology
from lab.vm.tcg import access_plugin
from lab.vm.tcg.access_plugin import AccessPlugin

# Each instrument's summary line of a manifest, in the manifest's order (lab.run.summary).
SUMMARIES: tuple[Callable[[dict], list[str]], ...] = (access_matrix.summary_lines, remote_latency.summary_lines)


def instruments_of(opts: RunOptions, topo: Topology) -> tuple[Instrument, ...]:
    """The instruments ``opts`` ask for on ``topo``, in the manifest's order (one-line errors for a model the
    machine cannot have)."""
    asked = (
        access_matrix.AccessMatrix.asked(opts.access, topo),
        remote_latency.RemoteLatency.asked(opts.latency, opts.guest_time, topo),
    )
    return tuple(i for i in asked if i is not None)


def check(instruments: Sequence[Instrument], plan: Plan) -> None:
    """Each instrument's check against ``plan`` (one-line errors, before anything is built or booted)."""
    for instrument in instruments:
        instrument.check(plan)


def from_workload(instruments: Sequence[Instrument]) -> bool:
    """Whether the plugin starts at the workload's start (the guest's init then runs numalab-model-start)."""
    return any(i.from_workload for i in instruments)


def build_plugin(
    instruments: Sequence[Instrument], topo: Topology, workdir: Path, qemu_version: str, address_map: str = ""
) -> AccessPlugin | None:
    """The plugin for the instruments (None: none asked), built for the run's QEMU (its ``--version`` line); their
    counts go to ``workdir``, the address map is ``address_map`` or the version's (lab.vm.tcg.access_plugin)."""
    if not instruments:
        return None
    args = [a for i in instruments for a in i.plugin_args(workdir)]
    return access_plugin.prepare(topo, args, workdir, qemu_version, address_map)


def collect(
    instruments: Sequence[Instrument], record_dir: Path, plugin: AccessPlugin | None, window: Window
) -> tuple[InstrumentResult, ...]:
    """Each instrument's counts into the record, in the manifest's order (none without a plugin)."""
    if plugin is None:
        return ()
    return tuple(i.collect(record_dir, plugin, window) for i in instruments)


def summary_lines(manifest: dict) -> list[str]:
    """The run summary's lines of the instruments a manifest has."""
    return [line for summary in SUMMARIES for line in summary(manifest)]

"""The memory charge as a run asks for it (:class:`LatencyOptions`, a piece of lab.run.options.RunOptions): what a
remote miss costs, a stream's bandwidth and the coherence model, checked here beside the model they configure
(lab.vm.tcg.latency_model) and made into its :class:`~lab.vm.tcg.latency_model.LatencyModel` (:meth:`model`).

The field names are the run options' (``--remote-latency``, ``--remote-latency-ns``, ``--remote-bandwidth-gbs``,
``--coherence``, ``--coherence-mib``; the same keys in a saved options file). Whether this run can have the plugin
at all (TCG, direct QEMU, the QEMU binary's charge) is checked when the run is planned (lab.run.remote_latency)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from lab.errors import LabError, check_choice
from lab.topology.model.topology import Topology
from lab.vm.tcg.latency_model import (
    REMOTE_LATENCY,
    LatencyModel,
    check_coherence_mib,
    check_local_gbs,
    check_local_ns,
    default_local_gbs,
    default_local_ns,
    model_for,
    share_window_ns,
)

COHERENCE = ("", "on", "off")


@dataclass(frozen=True)
class LatencyOptions:
    remote_latency: str = "off"  # off, slit, table: remote misses cost (lab.vm.tcg.latency_model)
    remote_latency_ns: float | None = None  # L, the local miss latency; None: the default
    remote_bandwidth_gbs: float | None = None  # a stream miss's local bandwidth (0: no streams); None: the default
    coherence: str = ""  # on, off: lines moving between nodes charged; "": the default (off)
    coherence_mib: int | None = None  # an LLC's size with coherence on (0: no limit); None: the spec's llc:, else 32
    cache_ways: int | None = None  # the modelled per-vCPU cache's ways; None: the default (8)

    # (not a field: the choices of its word options, which the command line offers)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"remote_latency": REMOTE_LATENCY, "coherence": COHERENCE}

    def check(self) -> None:
        """One-line errors naming the flag: the words, the numbers' ranges, and each part only with what it
        refines (--remote-latency-ns, --remote-bandwidth-gbs, --coherence and --cache-ways with --remote-latency,
        --coherence-mib with --coherence on)."""
        check_choice("--remote-latency", self.remote_latency, REMOTE_LATENCY)
        check_choice("--coherence", self.coherence, COHERENCE)
        if self.coherence_mib is not None and self.coherence != "on":
            raise LabError("--coherence-mib: only with --coherence on")
        if self.remote_latency == "off":
            if self.remote_latency_ns is not None:
                raise LabError("--remote-latency-ns: only with --remote-latency slit")
            if self.remote_bandwidth_gbs is not None:
                raise LabError("--remote-bandwidth-gbs: only with --remote-latency slit or table")
            if self.coherence:
                raise LabError("--coherence: only with --remote-latency slit or table")
            if self.cache_ways is not None:
                raise LabError("--cache-ways: only with --remote-latency slit or table")
            return
        if self.remote_latency_ns is not None:
            check_local_ns(self.remote_latency_ns)
        if self.remote_bandwidth_gbs is not None:
            check_local_gbs(self.remote_bandwidth_gbs)
        if self.coherence_mib is not None:
            check_coherence_mib(self.coherence_mib)
        if self.cache_ways is not None and self.cache_ways not in (1, 2, 4, 8, 16, 32, 64):
            raise LabError(f"--cache-ways: {self.cache_ways}: not a power of two from 1 to 64")

    @property
    def on(self) -> bool:
        return self.remote_latency != "off"

    def local_gbs(self, clock: str) -> float:
        """The stream bandwidth the model charges at under ``clock``: --remote-bandwidth-gbs, else the clock's
        default."""
        return default_local_gbs(clock) if self.remote_bandwidth_gbs is None else self.remote_bandwidth_gbs

    def model(self, topo: Topology, clock: str, quantum: int) -> LatencyModel | None:
        """The plugin's model on ``topo`` under ``clock`` with parallel guest time ``quantum`` (ns; 0: one shared
        clock), every part not given at its default; None with --remote-latency off."""
        if not self.on:
            return None
        local_ns = default_local_ns(clock) if self.remote_latency_ns is None else self.remote_latency_ns
        # (coherence "": the default, off; the LLC's size None: the spec's llc: size_mib:, else the default)
        model = model_for(topo, self.remote_latency, local_ns, clock, self.local_gbs(clock), share_window_ns(quantum),
                          self.coherence == "on", self.coherence_mib)  # fmt: skip
        return model if model is None or self.cache_ways is None else replace(model, ways=self.cache_ways)

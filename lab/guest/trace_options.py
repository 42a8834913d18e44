"""The tracing as a run asks for it (:class:`TraceOptions`, a piece of lab.run.options.RunOptions): extra events,
the trace buffer, the trace's mode, --no-trace, --lean and --node-maps, checked here beside the guest settings they
configure (lab.guest.settings) and made into its fields (:meth:`settings_fields`).

The field names are the run options' (``--event`` is ``events``, ``--no-trace`` ``no_trace``; the same keys in a
saved options file). The default set of events is the analyses' (lab.analysis.numa), a layer above this one: the
planner passes it in."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from lab.errors import LabError, check_choice
from lab.guest.settings import TRACE_MODES, GuestSettings


@dataclass(frozen=True)
class TraceOptions:
    events: tuple[str, ...] = ()  # extra trace events (SYS:EVENT), beyond the default set
    trace_buffer_kb: int = 4096
    node_maps: bool = False  # the workload's pages per node, from numa_maps with every vmstat sample (--node-maps)
    no_trace: bool = False
    # --lean: only NUMA balancing's own events (no per-task residency events) and no per-node memory samples
    lean: bool = False
    trace_mode: str = "raw"

    # (not a field: the choices of its word options, which the command line offers)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"trace_mode": TRACE_MODES}

    def check(self) -> None:
        """One-line errors naming the flag: the mode's word, options that conflict (--no-trace with --event or
        --trace-mode, --lean with --node-maps), and the guest settings' own checks of the events and the buffer."""
        check_choice("--trace-mode", self.trace_mode, TRACE_MODES)
        if self.no_trace:
            if self.events:
                raise LabError(f"--event {self.events[0]}: not with --no-trace (nothing is traced)")
            if self.trace_mode != "raw":
                raise LabError(f"--trace-mode {self.trace_mode}: not with --no-trace (nothing is traced)")
        if self.lean and self.node_maps:
            raise LabError("--node-maps: not with --lean (a lean run takes no node memory samples)")
        GuestSettings("true", 1.0, **self.settings_fields((), ()))

    def trace_events(self, default: Sequence[str], lean: Sequence[str]) -> tuple[str, ...]:
        """What a run traces: the ``default`` events (the analyses'; with --lean the ``lean`` ones), then the
        --event ones, each once; nothing with --no-trace."""
        if self.no_trace:
            return ()
        return tuple(dict.fromkeys([*(lean if self.lean else default), *self.events]))

    def settings_fields(self, default: Sequence[str], lean: Sequence[str]) -> dict:
        """The tracing fields of the guest settings (lab.guest.settings.GuestSettings), the events as
        :meth:`trace_events`."""
        return {"trace_events": self.trace_events(default, lean), "trace_buffer_kb": self.trace_buffer_kb,
                "node_maps": self.node_maps, "node_samples": not self.lean, "trace_mode": self.trace_mode}  # fmt: skip

"""The guest clock as a run asks for it (:class:`ClockOptions`, a piece of lab.run.options.RunOptions): which clock,
the seed, parallel guest time and the modelled CPU's speed, checked here beside the clock they configure
(lab.vm.tcg.guest_clock) and made into its :class:`~lab.vm.tcg.guest_clock.GuestClock`.

The field names are the run options' (``--clock``, ``--seed``, ``--quantum``, ``--insns-per-ns``; the same keys in a
saved options file). What needs the backend, the accelerator or the QEMU binary is checked when the run is planned
(lab.run.batch); the seed's upper bound, which depends on the number of repeats, is given to :meth:`check`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lab.errors import LabError, check_choice
from lab.vm.tcg.guest_clock import CLOCKS, MAX_SEED, GuestClock, check_insns_per_ns, check_quantum


@dataclass(frozen=True)
class ClockOptions:
    clock: str = "host"  # the guest's clock: host, or virtual (it counts instructions: lab.vm.tcg.guest_clock)
    seed: int | None = None  # --clock virtual: the first repeat's seed (repeat i gets seed + i); None: 0
    quantum: int = 0  # --clock virtual: each vCPU its own guest time, at most this many ns ahead; 0: one shared
    insns_per_ns: int = 1  # --clock virtual: instructions a vCPU executes in a guest ns

    # (not a field: the choices of its word options, which the command line offers)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"clock": CLOCKS}

    def check(self, repeat: int = 1) -> None:
        """One-line errors naming the flag: the clock's word, the seed (0..MAX_SEED - ``repeat``, the virtual clock
        only: the host's clock does not repeat a run, so a seed would choose nothing), --quantum and
        --insns-per-ns (the virtual clock only)."""
        check_choice("--clock", self.clock, CLOCKS)
        if self.seed is not None:
            if self.clock != "virtual":
                raise LabError("--seed: only with --clock virtual (under the host's clock no run repeats another)")
            top = MAX_SEED - repeat
            if not 0 <= self.seed <= top:
                raise LabError(f"--seed: must be 0..{top} (with --repeat {repeat}), got {self.seed}")
        check_quantum(self.quantum, self.clock)
        check_insns_per_ns(self.insns_per_ns, self.clock)

    @property
    def virtual(self) -> bool:
        return self.clock == "virtual"

    def seed_of(self, repeat: int) -> int:
        """The seed of repeat ``repeat`` (0-based): --seed (default 0) plus the repeat. Both kernels of an A/B
        get the same seeds, so a difference between them is the kernels', not the seeds'."""
        return (self.seed or 0) + repeat

    def guest_clock(self) -> GuestClock:
        """The clock these options ask for (its seed and PAUSE time are set per run, by the planner)."""
        return GuestClock(self.clock, quantum_ns=self.quantum, insns_per_ns=self.insns_per_ns)

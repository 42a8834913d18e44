"""The access matrix as a run asks for it (:class:`AccessOptions`, a piece of lab.run.options.RunOptions): whether
the plugin counts the guest's memory accesses by node, how often it samples and its address map, checked here
beside the plugin they configure (lab.vm.tcg.access_plugin).

The field names are the run options' (``--access-matrix``, ``--access-sample``, ``--access-address-map``; the same
keys in a saved options file). Whether this run can have the plugin (TCG, the backend, the clock, the QEMU
binary) is checked when the run is planned (lab.run.access_matrix.check_request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from lab.errors import LabError, check_choice
from lab.vm.tcg.access_plugin import ADDRESS_MODES, DEFAULT_SAMPLE

ADDRESS_MAPS = ("", *ADDRESS_MODES)


@dataclass(frozen=True)
class AccessOptions:
    access_matrix: bool = False
    access_sample: int | None = None  # every Nth access of each vCPU; None: DEFAULT_SAMPLE
    access_address_map: str = ""  # ram-block or guest-physical; "" chooses by QEMU version

    # (not a field: the choices of its word options, which the command line offers)
    CHOICES: ClassVar[dict[str, tuple[str, ...]]] = {"access_address_map": ADDRESS_MAPS}

    def check(self) -> None:
        """One-line errors naming the flag: the address map's word, --access-sample only with --access-matrix."""
        check_choice("--access-address-map", self.access_address_map, ADDRESS_MAPS)
        if self.access_sample is not None and not self.access_matrix:
            raise LabError("--access-sample: only with --access-matrix")

    def sample(self) -> int:
        """The plugin's sampling period asked for: --access-sample, else DEFAULT_SAMPLE (its range is checked with
        the run's: lab.run.access_matrix.check_request)."""
        return DEFAULT_SAMPLE if self.access_sample is None else self.access_sample

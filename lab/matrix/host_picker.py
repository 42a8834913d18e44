"""Spreading a matrix's runs over libvirt hosts: the least-loaded host with a free slot.

Only the matrix runner places runs on several hosts, so the picking lives with it (the
hosts themselves are :class:`lab.vm.libvirt.libvirt_hostspec.HostSpec`). The runner's
scheduling loop is single-threaded: no locking.
"""

from __future__ import annotations

from collections.abc import Iterable

from lab.errors import LabError
from lab.vm.libvirt.libvirt_hostspec import HostSpec


class HostPicker:
    """Hands out hosts to runs: the least-loaded host with a free slot (ties: the earlier-listed host)."""

    def __init__(self, hosts: Iterable[HostSpec]) -> None:
        self.hosts = list(hosts)
        if not self.hosts:
            raise LabError("hosts: no hosts to run on")
        self.busy = {h.uri: 0 for h in self.hosts}
        self.done = {h.uri: 0 for h in self.hosts}

    def pick(self) -> HostSpec | None:
        """The host the next run should go to, or None when every host is full."""
        free = [h for h in self.hosts if self.busy[h.uri] < h.capacity]
        if not free:
            return None
        return min(free, key=lambda h: (self.busy[h.uri] / h.capacity, self.done[h.uri] / h.capacity))

    def take(self, host: HostSpec) -> None:
        """A run starts on ``host``."""
        self.busy[host.uri] += 1

    def release(self, host: HostSpec) -> None:
        """A run on ``host`` ended: its slot is free again."""
        self.busy[host.uri] -= 1
        self.done[host.uri] += 1

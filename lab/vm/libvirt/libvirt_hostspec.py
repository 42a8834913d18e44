"""A libvirt host as numalab uses it: its URI, how many runs it takes at once, where its images go.

``parse_hosts`` reads a matrix spec's ``hosts:`` list; ``check_host`` says, before
anything is built, whether the host can be reached and what it is (one-line error if not).
A host with ``upload: false`` never receives a kernel from numalab: it must
already have it in its pool directory (seeded by hand, e.g. over rsync or a
shared mount).
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

from lab.errors import LabError
from lab.vm.libvirt.libvirt_conn import close_quietly, connect, host_inventory, is_local_uri, uri_parts, version_string

POOL_NAME = "numalab"
SYSTEM_POOL_DIR = "/var/lib/libvirt/numalab"


def default_pool_dir(uri: str) -> str:
    """Where numalab keeps images and results on the host behind ``uri``."""
    p = uri_parts(uri)
    if p["path"] == "/session" and not (p["socket"] == "" and is_local_uri(uri) and os.geteuid() == 0):
        # A session daemon runs as some user whose home we cannot see from here; /var/tmp is writable by all.
        return f"/var/tmp/numalab-libvirt-{hashlib.sha256(uri.encode()).hexdigest()[:8]}"
    return SYSTEM_POOL_DIR


@dataclass(frozen=True)
class HostSpec:
    uri: str
    capacity: int = 1
    pool_dir: str = ""  # "" = default_pool_dir(uri)
    upload: bool = True  # False: the host must already hold the kernel image in pool_dir

    @property
    def pool_path(self) -> str:
        return self.pool_dir or default_pool_dir(self.uri)

    @property
    def pool_name(self) -> str:
        """The libvirt pool over pool_path: ``numalab`` for the default directory, else one named after the path."""
        if self.pool_path == default_pool_dir(self.uri):
            return POOL_NAME
        return f"{POOL_NAME}_{hashlib.sha256(self.pool_path.encode()).hexdigest()[:8]}"

    def to_dict(self) -> dict:
        return {"uri": self.uri, "capacity": self.capacity, "pool_dir": self.pool_path, "upload": self.upload}


HOST_KEYS = {"uri", "capacity", "pool_dir", "upload"}


def parse_hosts(data, where: str = "hosts") -> list[HostSpec]:
    """A spec's ``hosts:`` list: each a URI string or {uri, capacity, pool_dir, upload}."""
    if not isinstance(data, list) or not data:
        raise LabError(f"{where}: expected a non-empty list of libvirt URIs or {{uri, capacity}} entries")
    hosts: list[HostSpec] = []
    for i, item in enumerate(data):
        at = f"{where}[{i}]"
        if isinstance(item, str):
            item = {"uri": item}
        if not isinstance(item, dict):
            raise LabError(f"{at}: expected a URI or a mapping with uri and capacity, got {item!r}")
        unknown = set(item) - HOST_KEYS
        if unknown:
            raise LabError(f"{at}: unknown key {sorted(unknown)[0]!r} (known: {', '.join(sorted(HOST_KEYS))})")
        uri = item.get("uri")
        if not isinstance(uri, str) or "://" not in uri:
            raise LabError(f"{at}.uri: expected a libvirt URI such as qemu:///system, got {uri!r}")
        if not uri_parts(uri)["driver"].startswith("qemu"):
            raise LabError(f"{at}.uri: {uri}: only the qemu driver is supported")
        cap = item.get("capacity", 1)
        if not isinstance(cap, int) or isinstance(cap, bool) or cap < 1:
            raise LabError(f"{at}.capacity: expected a whole number >= 1, got {cap!r}")
        pool_dir = item.get("pool_dir", "")
        if pool_dir and (not isinstance(pool_dir, str) or not pool_dir.startswith("/")):
            raise LabError(f"{at}.pool_dir: expected an absolute path on that host, got {pool_dir!r}")
        upload = item.get("upload", True)
        if not isinstance(upload, bool):
            raise LabError(f"{at}.upload: expected true or false, got {upload!r}")
        hosts.append(HostSpec(uri, cap, pool_dir, upload))
    seen: set[str] = set()
    for i, h in enumerate(hosts):
        if h.uri in seen:
            raise LabError(f"{where}[{i}].uri: {h.uri} is listed twice")
        seen.add(h.uri)
    return hosts


def check_host(spec: HostSpec) -> dict:
    """Reachability and what the host is: one-line LabError if it cannot be used."""
    conn = connect(spec.uri)
    try:
        inv = host_inventory(conn)
        return {
            "uri": conn.getURI(),
            "hostname": conn.getHostname(),
            "libvirt": version_string(conn.getLibVersion()),
            "hypervisor": version_string(conn.getVersion()),
            "nodes": len(inv.nodes),
            "cpus": inv.n_cpus,
            "mem_available_mib": inv.mem_available_mib,
            "capacity": spec.capacity,
            "pool_dir": spec.pool_path,
        }
    finally:
        close_quietly(conn)

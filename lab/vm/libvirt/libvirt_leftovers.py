"""numalab's libvirt domains on a host: who owns each (the process that started it), and the leftovers
of runs whose process is gone (``numalab doctor --connect URI [--clean]``).

Every run's domain is transient and auto-destroyed, but a domain defined by hand, a daemon that outlived
a killed numalab, or a results pool left half-deleted can stay behind. A domain carries its owner in
its metadata: the host, the pid and that process's start (a pid is reused, a pid with its start time
is not), so a leftover is told from the domain of a run still going whatever program started it.
"""

from __future__ import annotations

import os
import socket
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from lab.vm.libvirt.libvirt_conn import is_error, libvirt_module, short_error
from lab.vm.libvirt.libvirt_hostspec import HostSpec
from lab.vm.libvirt.libvirt_storage import ImageStore, ensure_pool

DOMAIN_PREFIX = "numalab-"
METADATA_NS = "https://numalab.invalid/xmlns/run/1"
METADATA_KEY = "numalab"


def clean_hint(uri: str) -> str:
    return f"numalab doctor --connect {uri} --clean"


def process_start(pid: int) -> str:
    """Which process ``pid`` is: its start time (clock ticks since boot, /proc/PID/stat field 22) and
    this boot's id, or "" when no such process runs. A pid is reused; a pid with its start time is not."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
    fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": field 3 (state) is fields[0]
    return f"{boot}:{fields[22 - 3]}"


def with_metadata(xml: str, run_dir: Path) -> str:
    """Add numalab's <metadata>: the owner process (host, pid and that process's start) so a leftover
    can be told from the domain of a run still going, whatever program started it."""
    ET.register_namespace(METADATA_KEY, METADATA_NS)
    root = ET.fromstring(xml)
    meta = ET.Element("metadata")
    ET.SubElement(
        meta,
        f"{{{METADATA_NS}}}run",
        {
            "pid": str(os.getpid()),
            "pid_start": process_start(os.getpid()),
            "host": socket.gethostname(),
            "run_dir": str(run_dir),
            "started": _now(),
        },
    )
    root.insert(1, meta)
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _owner(dom) -> dict:
    try:
        meta = ET.fromstring(dom.metadata(2, METADATA_NS, 0))  # VIR_DOMAIN_METADATA_ELEMENT
    except Exception:  # noqa: BLE001 - no numalab metadata: not ours or an old run
        return {}
    pid = int(meta.get("pid", "0") or 0)
    host = meta.get("host", "")
    start = meta.get("pid_start", "")
    now = process_start(pid) if pid and host == socket.gethostname() else ""
    # An older numalab recorded no start: its domain is kept while its pid runs (at worst a leftover
    # stays behind one more time; a live run is never destroyed).
    alive = bool(now) and (now == start or not start)
    return {"pid": pid, "host": host, "alive": alive, "run_dir": meta.get("run_dir", "")}


def leftovers(conn, spec: HostSpec | None = None) -> dict:
    """numalab-* domains, per-run pools and per-run volumes on the host behind ``conn``."""
    libvirt = libvirt_module()
    doms = []
    live_names = set()
    for dom in conn.listAllDomains(0):
        name = dom.name()
        if not name.startswith(DOMAIN_PREFIX):
            continue
        try:
            state = dom.state(0)[0]
            persistent = bool(dom.isPersistent())
        except libvirt.libvirtError as err:
            if is_error(err, libvirt.VIR_ERR_NO_DOMAIN):
                continue  # it went away (a transient run ended) between the listing and now
            raise
        owner = _owner(dom)
        if owner.get("alive"):
            live_names.add(name)
        doms.append(
            {
                "name": name,
                "running": state != libvirt.VIR_DOMAIN_SHUTOFF,
                "persistent": persistent,
                "owner": owner,
            }
        )
    pools = [
        p.name()
        for p in conn.listAllStoragePools(0)
        if p.name().startswith(DOMAIN_PREFIX)
        and p.name().endswith("-results")
        and p.name()[: -len("-results")] not in live_names
    ]
    vols = []
    try:
        pool = conn.storagePoolLookupByName((spec or HostSpec(conn.getURI())).pool_name)
        if pool.isActive():
            pool.refresh(0)
            for v in pool.listAllVolumes(0):
                n = v.name()
                base = n.removesuffix(".plugin.so") if n.endswith(".plugin.so") else n.rsplit(".", 1)[0]
                kinds = (".initrd", ".results", ".plugin.so")  # (.plugin.so: --access-matrix)
                if n.startswith(DOMAIN_PREFIX) and n.endswith(kinds) and base not in live_names:
                    vols.append(n)
    except libvirt.libvirtError:
        pass
    return {"domains": doms, "pools": sorted(pools), "volumes": sorted(vols), "live": sorted(live_names)}


def clean(conn, spec: HostSpec | None = None) -> dict:
    """Remove leftovers: destroy and undefine numalab-* domains whose numalab process is gone, their pools
    and volumes. Domains of a numalab process still running on this machine are kept."""
    libvirt = libvirt_module()
    found = leftovers(conn, spec)
    removed: dict = {"domains": [], "pools": [], "volumes": [], "kept": found["live"], "problems": []}
    for d in found["domains"]:
        if d["name"] not in found["live"]:
            _remove_domain(conn, libvirt, d["name"], removed)
    for name in found["pools"]:
        _remove_pool(conn, libvirt, name, removed)
    if found["volumes"]:
        _remove_volumes(conn, spec, found["volumes"], removed)
    return removed


def _remove_domain(conn, libvirt, name: str, removed: dict) -> None:
    """Destroy and undefine domain ``name``; into ``removed``'s domains, or its problems (gone already: neither)."""
    try:
        dom = conn.lookupByName(name)
        if dom.isActive():
            dom.destroy()
        if dom.isPersistent():
            dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE)
        removed["domains"].append(name)
    except libvirt.libvirtError as err:
        if not is_error(err, libvirt.VIR_ERR_NO_DOMAIN):
            removed["problems"].append(f"{name}: {short_error(err)}")


def _remove_pool(conn, libvirt, name: str, removed: dict) -> None:
    """Delete pool ``name``'s volumes, stop and undefine it; into ``removed``'s pools, or its problems."""
    try:
        pool = conn.storagePoolLookupByName(name)
        if not pool.isActive():
            pool.create(0)
        pool.refresh(0)
        for v in pool.listAllVolumes(0):
            v.delete(0)
        pool.destroy()
        if pool.isPersistent():
            pool.undefine()
        removed["pools"].append(name)
    except libvirt.libvirtError as err:
        removed["problems"].append(f"pool {name}: {short_error(err)}")


def _remove_volumes(conn, spec: HostSpec | None, names: list[str], removed: dict) -> None:
    """Remove the per-run volumes ``names`` (emptying results directories first) from the image pool; each
    into ``removed``'s volumes, or its problems when it is still there."""
    store = ImageStore(conn, spec or HostSpec(conn.getURI())).open()
    for name in names:
        if name.endswith(".results"):
            _empty_dir(conn, store, name, removed["problems"])
        store.remove(name)
        if name not in [v[0] for v in store.volumes()]:
            removed["volumes"].append(name)
        else:
            removed["problems"].append(f"volume {name}: could not be removed")


def _empty_dir(conn, store: ImageStore, name: str, problems: list[str]) -> None:
    """Delete the files of a results directory whose pool is gone (through a short-lived pool on it)."""
    libvirt = libvirt_module()
    path = f"{store.path}/{name}"
    pool_name = f"{name[: -len('.results')]}-results"
    try:
        pool = ensure_pool(conn, pool_name, path, build=False)
        pool.refresh(0)
        for v in pool.listAllVolumes(0):
            v.delete(0)
        pool.destroy()
    except libvirt.libvirtError as err:
        problems.append(f"emptying {path}: {short_error(err)}")

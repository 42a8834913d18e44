"""Talking to a libvirt daemon: the bindings, URIs, connecting with one-line errors, and what the host is.

A *host* is a libvirt URI (``qemu:///system``, ``qemu+ssh://user@box/system``,
``qemu+unix:///session?socket=...``). Everything numalab needs from it goes
through libvirt itself, so a remote host needs nothing but a reachable libvirtd.
"""

from __future__ import annotations

import socket
import xml.etree.ElementTree as ET
from urllib.parse import parse_qs, urlsplit

from lab.errors import LabError
from lab.placement.host_inventory import HostInventory, NodeFree
from lab.topology.model.machine import Machine, MachineNode

UP_HINT = "start it with: make libvirt-up (or: sudo python3 -m lab.host.libvirtd up)"


def libvirt_module():
    """The libvirt bindings, with a one-line error when they are missing; libvirt's stderr printer silenced."""
    try:
        import libvirt  # (optional: the libvirt extra)
    except ImportError:
        raise LabError(
            "the libvirt backend needs libvirt-python: .venv/bin/pip install -e '.[libvirt]' "
            "(needs libvirt-dev, pkg-config, gcc, python3-dev; make setup does all of it)"
        ) from None
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    return libvirt


def short_error(err: Exception) -> str:
    get = getattr(err, "get_error_message", None)
    msg = (get() if get else None) or str(err)
    return " ".join(msg.split())


def is_error(err, *codes: int) -> bool:
    return getattr(err, "get_error_code", lambda: None)() in codes


def uri_parts(uri: str) -> dict:
    """{'driver', 'transport', 'host', 'path', 'socket'} of a libvirt URI."""
    u = urlsplit(uri)
    driver, _, transport = u.scheme.partition("+")
    return {
        "driver": driver,
        "transport": transport or ("unix" if not u.hostname else "tls"),
        "host": u.hostname or "",
        "path": u.path,
        "socket": (parse_qs(u.query).get("socket") or [""])[0],
    }


# The ports libvirt's network transports use when a URI names none.
DEFAULT_PORTS = {"ssh": 22, "libssh": 22, "libssh2": 22, "tcp": 16509, "tls": 16514}


def is_local_uri(uri: str) -> bool:
    """True when the URI's daemon runs on this machine (no host, or this host's own name). A network
    transport to another port than its default is a forward, to another machine as far as numalab knows
    (``numalab nested``'s libvirt host is ``qemu+ssh://user@127.0.0.1:PORT/system``)."""
    parts = uri_parts(uri)
    try:
        port = urlsplit(uri).port
    except ValueError:
        return False
    if port is not None and port != DEFAULT_PORTS.get(parts["transport"]):
        return False
    return parts["host"] in ("", "localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn())


def connect(uri: str):
    """Open ``uri``; a one-line LabError that says what to do when it cannot be opened."""
    libvirt = libvirt_module()
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as err:
        msg = short_error(err)
    parts = uri_parts(uri)
    no_daemon = ("Failed to connect socket" in msg or "failed to connect to the hypervisor" in msg.lower()) and (
        "No such file or directory" in msg or "Connection refused" in msg
    )
    if no_daemon and parts["transport"] == "unix" and is_local_uri(uri):
        sock = parts["socket"] or _socket_in(msg)
        raise LabError(f"{uri}: the libvirt daemon is not running (nothing listens on {sock}); {UP_HINT}")
    if "no connection driver available" in msg.lower() or "unsupported" in msg.lower() and "URI" in msg:
        raise LabError(f"{uri}: not a libvirt URI this client can open ({msg})")
    raise LabError(f"{uri}: unreachable ({msg})")


def _socket_in(msg: str) -> str:
    start = msg.find("'")
    end = msg.find("'", start + 1)
    return msg[start + 1 : end] if 0 <= start < end else "its socket"


def close_quietly(conn) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a dead connection must not mask the real error
        pass


def capabilities(conn) -> ET.Element:
    return ET.fromstring(conn.getCapabilities())


def qemu_dac_label(conn, domain_type: str) -> tuple[int, int] | None:
    """(uid, gid) QEMU runs as on this host (qemu:///system: libvirt-qemu), None for a session daemon."""
    for sm in capabilities(conn).iter("secmodel"):
        if sm.findtext("model") != "dac":
            continue
        for bl in sm.findall("baselabel"):
            if bl.get("type") == domain_type and bl.text:
                uid, _, gid = bl.text.replace("+", "").partition(":")
                try:
                    return int(uid), int(gid)
                except ValueError:
                    return None
    return None


def host_inventory(conn) -> HostInventory:
    """The NUMA inventory of the host behind ``conn`` (from its capabilities), as read_inventory() reads ours."""
    cells = capabilities(conn).findall("./host/topology/cells/cell")
    if not cells:
        info = conn.getInfo()  # [model, memory MiB, cpus, mhz, nodes, sockets, cores, threads]
        free = conn.getFreeMemory() // (1 << 20)
        cpus = tuple(range(info[2]))
        machine = Machine((MachineNode(0, cpus, info[1]),), ((10,),), "libvirt's node info")
        return HostInventory(machine, cpus, free, (NodeFree(free),))
    nodes = []
    frees = []
    slit: dict[int, dict[int, int]] = {}
    for cell in cells:
        cid = int(cell.get("id"))
        cpus = tuple(sorted(int(c.get("id")) for c in cell.findall("./cpus/cpu")))
        total = int(cell.findtext("memory", "0")) // 1024
        try:
            free = conn.getCellsFreeMemory(cid, 1)[0] // (1 << 20)
        except Exception:  # noqa: BLE001 - some drivers cannot tell; assume the cell's total
            free = total
        huge = {}
        for pg in cell.findall("pages"):
            size = int(pg.get("size", "0"))
            if size > 4:
                try:
                    huge[size] = int(conn.getFreePages([size], cid, 1)[cid][size])
                except Exception:  # noqa: BLE001
                    huge[size] = int(pg.text or 0)
        nodes.append(MachineNode(cid, cpus, total))
        frees.append(NodeFree(free, huge))
        slit[cid] = {int(s.get("id")): int(s.get("value")) for s in cell.findall("./distances/sibling")}
    online = tuple(sorted(c for n in nodes for c in n.cpus))
    ids = [n.id for n in nodes]
    known = all(set(ids) <= set(slit[i]) for i in ids)
    distances = tuple(tuple(slit[a][b] for b in ids) for a in ids) if known else ()
    machine = Machine(tuple(nodes), distances, "libvirt's capabilities")
    return HostInventory(machine, online, sum(f.mem_available_mib for f in frees), tuple(frees))


def version_tuple(v: int) -> tuple[int, int, int]:
    """libvirt's version number of a program (``conn.getVersion()``: 10000002) -> (10, 0, 2)."""
    return v // 1000000, v // 1000 % 1000, v % 1000


def version_string(v: int) -> str:
    return ".".join(map(str, version_tuple(v)))

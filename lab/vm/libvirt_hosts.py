"""libvirt hosts: connecting (with one-line errors), the host's view, images, and spreading runs.

A *host* is a libvirt URI (``qemu:///system``, ``qemu+ssh://user@box/system``,
``qemu+unix:///session?socket=...``) with a capacity (how many runs at once).
Everything a run needs on a host goes through libvirt itself, so a remote
host needs nothing but a reachable libvirtd:

* the kernel and the run's initramfs are uploaded through the storage API
  (``storageVolCreateXML`` + a stream) into the host's ``numalab`` directory
  pool (``pool_dir``, default ``/var/lib/libvirt/numalab`` for ``/system``);
  kernels are kept there by content hash and uploaded once per host;
* the run's results directory (the 9p share, written by QEMU) is a
  directory volume of that pool, and comes back through a second, per-run
  pool and stream downloads (the serial console too, while it is written).

A host with ``upload: false`` never receives a kernel from numalab: it must
already have it in its pool directory (seeded by hand, e.g. over rsync or a
shared mount); if it lacks it, the run stops with a one-line error naming
the host, the image and the directory.
"""

from __future__ import annotations

import hashlib
import os
import socket
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from lab.errors import LabError
from lab.placement.host_inventory import HostInventory, HostNode

POOL_NAME = "numalab"
SYSTEM_POOL_DIR = "/var/lib/libvirt/numalab"
UP_HINT = "start it with: make libvirt-up (or: sudo python3 -m lab.host.libvirtd up)"
CHUNK = 1 << 20
KERNEL_WAIT_S = 120.0  # another run uploading the same kernel to the same host


def libvirt_module():
    """The libvirt bindings, with a one-line error when they are missing; libvirt's stderr printer silenced."""
    try:
        import libvirt
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


# --- URIs and host specs ---------------------------------------------------------------------------


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


def is_local_uri(uri: str) -> bool:
    """True when the URI's daemon runs on this machine (no host, or this host's own name)."""
    host = uri_parts(uri)["host"]
    return host in ("", "localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn())


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


# --- connecting ------------------------------------------------------------------------------------


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


def _caps(conn) -> ET.Element:
    return ET.fromstring(conn.getCapabilities())


def qemu_dac_label(conn, domain_type: str) -> tuple[int, int] | None:
    """(uid, gid) QEMU runs as on this host (qemu:///system: libvirt-qemu), None for a session daemon."""
    for sm in _caps(conn).iter("secmodel"):
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
    cells = _caps(conn).findall("./host/topology/cells/cell")
    if not cells:
        info = conn.getInfo()  # [model, memory MiB, cpus, mhz, nodes, sockets, cores, threads]
        free = conn.getFreeMemory() // (1 << 20)
        node = HostNode(0, tuple(range(info[2])), info[1], free, {})
        return HostInventory((node,), node.cpus, free)
    nodes = []
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
        nodes.append(HostNode(cid, cpus, total, free, huge))
    online = tuple(sorted(c for n in nodes for c in n.cpus))
    return HostInventory(tuple(nodes), online, sum(n.mem_available_mib for n in nodes))


def check_host(spec: HostSpec) -> dict:
    """Reachability and what the host is: one-line LabError if it cannot be used."""
    conn = connect(spec.uri)
    try:
        inv = host_inventory(conn)
        return {
            "uri": conn.getURI(),
            "hostname": conn.getHostname(),
            "libvirt": _version(conn.getLibVersion()),
            "hypervisor": _version(conn.getVersion()),
            "nodes": len(inv.nodes),
            "cpus": inv.n_cpus,
            "mem_available_mib": inv.mem_available_mib,
            "capacity": spec.capacity,
            "pool_dir": spec.pool_path,
        }
    finally:
        close_quietly(conn)


def _version(v: int) -> str:
    return f"{v // 1000000}.{v // 1000 % 1000}.{v % 1000}"


# --- storage: images up, results down --------------------------------------------------------------


def _pool_xml(name: str, path: str, perms: tuple[int, int, int] | None = None) -> str:
    pool = ET.Element("pool", type="dir")
    ET.SubElement(pool, "name").text = name
    target = ET.SubElement(pool, "target")
    ET.SubElement(target, "path").text = path
    if perms:
        _permissions(target, *perms)
    return ET.tostring(pool, encoding="unicode")


def _permissions(target: ET.Element, mode: int, uid: int, gid: int) -> None:
    p = ET.SubElement(target, "permissions")
    ET.SubElement(p, "mode").text = f"0{mode:o}"
    if uid >= 0:
        ET.SubElement(p, "owner").text = str(uid)
        ET.SubElement(p, "group").text = str(gid)


def _vol_xml(name: str, capacity: int, kind: str = "file", mode: int = 0o644, uid: int = -1, gid: int = -1) -> str:
    vol = ET.Element("volume", type=kind)
    ET.SubElement(vol, "name").text = name
    ET.SubElement(vol, "capacity", unit="bytes").text = str(capacity)
    target = ET.SubElement(vol, "target")
    ET.SubElement(target, "format", type="dir" if kind == "dir" else "raw")
    _permissions(target, mode, uid, gid)
    return ET.tostring(vol, encoding="unicode")


def _is_error(err, *codes: int) -> bool:
    return getattr(err, "get_error_code", lambda: None)() in codes


def ensure_pool(conn, name: str, path: str, perms: tuple[int, int, int] | None = None, build: bool = True):
    """An active dir pool ``name`` at ``path`` (transient; the directory and its files outlive it)."""
    libvirt = libvirt_module()
    for _attempt in range(3):
        try:
            pool = conn.storagePoolLookupByName(name)
        except libvirt.libvirtError as err:
            if not _is_error(err, libvirt.VIR_ERR_NO_STORAGE_POOL):
                raise
        else:
            if not pool.isActive():
                pool.create(0)
            return pool
        try:
            flags = libvirt.VIR_STORAGE_POOL_CREATE_WITH_BUILD if build else 0
            return conn.storagePoolCreateXML(_pool_xml(name, path, perms), flags)
        except libvirt.libvirtError as err:
            if "already exists" in short_error(err):  # another run made it just now
                continue
            raise
    return conn.storagePoolLookupByName(name)


def pool_path(pool) -> str:
    return ET.fromstring(pool.XMLDesc(0)).findtext("./target/path") or ""


def upload(conn, pool, name: str, src: Path, mode: int = 0o644, replace: bool = True):
    """Upload the local file ``src`` as volume ``name`` (replacing it, unless not ``replace``); the volume."""
    libvirt = libvirt_module()
    size = src.stat().st_size
    if replace:
        try:
            pool.storageVolLookupByName(name).delete(0)
        except libvirt.libvirtError:
            pass
    vol = pool.createXML(_vol_xml(name, size, mode=mode), 0)
    stream = conn.newStream(0)
    try:
        vol.upload(stream, 0, size, 0)
        with open(src, "rb") as f:
            while chunk := f.read(CHUNK):
                view = memoryview(chunk)
                while view:
                    n = stream.send(view.tobytes())
                    view = view[n:]
        stream.finish()
    except BaseException:
        try:
            stream.abort()
        except libvirt.libvirtError:
            pass
        try:
            vol.delete(0)
        except libvirt.libvirtError:
            pass
        raise
    return vol


def download(conn, vol, dest: Path, offset: int = 0, append: bool = False, max_bytes: int | None = None) -> int:
    """Stream the volume (from ``offset``, at most ``max_bytes``) into ``dest``; returns the bytes written."""
    stream = conn.newStream(0)
    n = 0
    with open(dest, "ab" if append else "wb") as f:
        try:
            vol.download(stream, offset, max_bytes or 0, 0)
            while True:
                data = stream.recv(CHUNK)
                if not data or isinstance(data, int):
                    break
                f.write(data)
                n += len(data)
            stream.finish()
        except BaseException:
            try:
                stream.abort()
            except Exception:  # noqa: BLE001
                pass
            raise
    return n


def file_sha(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class ImageStore:
    """The host's ``numalab`` pool: kernels by content hash, per-run initrds and results directories."""

    conn: object
    spec: HostSpec
    pool: object = None
    path: str = ""
    stats: dict = field(default_factory=lambda: {"uploaded_bytes": 0, "upload_s": 0.0})

    def open(self) -> ImageStore:
        libvirt = libvirt_module()
        name = self.spec.pool_name
        try:
            self.pool = ensure_pool(self.conn, name, self.spec.pool_path, (0o755, -1, -1))
        except libvirt.libvirtError as err:
            raise LabError(
                f"{self.spec.uri}: cannot use the storage pool {name} at {self.spec.pool_path} ({short_error(err)})"
            ) from None
        self.path = pool_path(self.pool)
        if os.path.normpath(self.path) != os.path.normpath(self.spec.pool_path):
            raise LabError(
                f"{self.spec.uri}: the storage pool {name} is at {self.path}, not {self.spec.pool_path} "
                f"(remove it with: virsh -c {self.spec.uri} pool-destroy {name})"
            )
        return self

    def _lookup(self, name: str):
        libvirt = libvirt_module()
        try:
            return self.pool.storageVolLookupByName(name)
        except libvirt.libvirtError:
            return None

    def kernel_name(self, kernel: Path) -> str:
        return f"kernel-{file_sha(kernel)[:16]}"

    def has_kernel(self, kernel: Path) -> str | None:
        """The kernel's path on the host if it is there whole, else None."""
        name = self.kernel_name(kernel)
        self.pool.refresh(0)
        vol = self._lookup(name)
        # The .ok marker says numalab's upload finished; a kernel seeded by hand (upload: false) needs none.
        ok = self._lookup(name + ".ok") is not None or not self.spec.upload
        if vol is not None and ok and vol.info()[1] == kernel.stat().st_size:
            return vol.path()
        return None

    def put_kernel(self, kernel: Path) -> str:
        """Make sure the host has the kernel (upload once per content hash); its path on the host."""
        libvirt = libvirt_module()
        name = self.kernel_name(kernel)
        have = self.has_kernel(kernel)
        if have:
            return have
        if not self.spec.upload:
            raise LabError(
                f"{self.spec.uri}: the host lacks the kernel image {name} in {self.path} (upload is off for this "
                f"host: copy {kernel} there as {name}, or set upload: true)"
            )
        t0 = time.monotonic()
        for attempt in range(2):
            try:
                vol = upload(self.conn, self.pool, name, kernel, replace=attempt > 0)
                if self._lookup(name + ".ok") is None:
                    self.pool.createXML(_vol_xml(name + ".ok", 0), 0)
                break
            except libvirt.libvirtError as err:
                if attempt == 0 and "already exists" in short_error(err):
                    # Another run is uploading it: wait for its .ok; one that died half way is replaced.
                    have = self._wait_for_kernel(kernel)
                    if have:
                        return have
                    continue
                raise LabError(
                    f"{self.spec.uri}: uploading the kernel to {self.path} failed ({short_error(err)})"
                ) from None
        self.stats["uploaded_bytes"] += kernel.stat().st_size
        self.stats["upload_s"] += time.monotonic() - t0
        return vol.path()

    def _wait_for_kernel(self, kernel: Path) -> str | None:
        deadline = time.monotonic() + KERNEL_WAIT_S
        while time.monotonic() < deadline:
            have = self.has_kernel(kernel)
            if have or self._lookup(self.kernel_name(kernel)) is None:
                return have
            time.sleep(1)
        return None

    def put_file(self, src: Path, name: str) -> str:
        libvirt = libvirt_module()
        t0 = time.monotonic()
        try:
            vol = upload(self.conn, self.pool, name, src)
        except libvirt.libvirtError as err:
            raise LabError(
                f"{self.spec.uri}: uploading {src.name} to {self.path} failed ({short_error(err)})"
            ) from None
        self.stats["uploaded_bytes"] += src.stat().st_size
        self.stats["upload_s"] += time.monotonic() - t0
        return vol.path()

    def make_dir(self, name: str, owner: tuple[int, int] | None) -> str:
        """A fresh directory volume (the results share), owned by QEMU's user on a system host."""
        uid, gid = owner if owner else (-1, -1)
        self.remove(name)
        vol = self.pool.createXML(_vol_xml(name, 0, kind="dir", mode=0o755, uid=uid, gid=gid), 0)
        return vol.path()

    def remove(self, name: str) -> None:
        libvirt = libvirt_module()
        self.pool.refresh(0)
        vol = self._lookup(name)
        if vol is not None:
            try:
                vol.delete(0)
            except libvirt.libvirtError:
                pass

    def volumes(self) -> list[tuple[str, int, int]]:
        """(name, type, bytes) of every volume (type 2 is a directory)."""
        self.pool.refresh(0)
        out = []
        for v in self.pool.listAllVolumes(0):
            kind, cap, _alloc = v.info()
            out.append((v.name(), kind, cap))
        return sorted(out)


def ensure_images(spec: HostSpec, kernel: Path) -> str:
    """Check (and, if allowed, upload) the kernel on the host: its path there, or a one-line LabError."""
    conn = connect(spec.uri)
    try:
        return ImageStore(conn, spec).open().put_kernel(kernel)
    finally:
        close_quietly(conn)


# --- spreading runs over hosts ---------------------------------------------------------------------


class HostPicker:
    """Hands out hosts to runs: the least-loaded host with a free slot (ties: the earlier-listed host).

    Thread-safe: ``acquire()`` blocks until a slot is free; ``release()`` gives it back. Use as
    ``with picker.slot() as host: ...``.
    """

    def __init__(self, hosts: Iterable[HostSpec]) -> None:
        self.hosts = list(hosts)
        if not self.hosts:
            raise LabError("hosts: no hosts to run on")
        self.busy = {h.uri: 0 for h in self.hosts}
        self.done = {h.uri: 0 for h in self.hosts}
        self._cv = threading.Condition()

    def pick(self) -> HostSpec | None:
        """The host the next run should go to, or None when every host is full (no locking)."""
        free = [h for h in self.hosts if self.busy[h.uri] < h.capacity]
        if not free:
            return None
        return min(free, key=lambda h: (self.busy[h.uri] / h.capacity, self.done[h.uri] / h.capacity))

    def acquire(self, timeout_s: float | None = None) -> HostSpec:
        with self._cv:
            if not self._cv.wait_for(lambda: self.pick() is not None, timeout=timeout_s):
                raise LabError("hosts: no free host slot within the timeout")
            host = self.pick()
            assert host is not None
            self.busy[host.uri] += 1
            return host

    def release(self, host: HostSpec) -> None:
        with self._cv:
            self.busy[host.uri] -= 1
            self.done[host.uri] += 1
            self._cv.notify_all()

    def slot(self, timeout_s: float | None = None):
        picker = self

        class _Slot:
            def __enter__(self_inner):
                self_inner.host = picker.acquire(timeout_s)
                return self_inner.host

            def __exit__(self_inner, *exc):
                picker.release(self_inner.host)
                return False

        return _Slot()

    @property
    def total_capacity(self) -> int:
        return sum(h.capacity for h in self.hosts)


def preflight(hosts: list[HostSpec], kernel: Path | None = None) -> list[dict]:
    """Check every host before a matrix starts: reachable, and (with ``kernel``) holding or receiving it."""
    out = []
    for h in hosts:
        info = check_host(h)
        if kernel is not None:
            info["kernel"] = ensure_images(h, kernel)
        out.append(info)
    return out

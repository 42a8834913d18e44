"""libvirt storage: images up, results down, all through the storage API (so a remote host works as a local one).

* the kernel and the run's initramfs are uploaded (``storageVolCreateXML`` + a
  stream) into the host's ``numalab`` directory pool (``HostSpec.pool_dir``,
  default ``/var/lib/libvirt/numalab`` for ``/system``); kernels are kept there
  by content hash and uploaded once per host;
* the run's results directory (the 9p share, written by QEMU) is a directory
  volume of that pool, and comes back through a second, per-run pool and
  stream downloads (the serial console too, while it is written).

A host with ``upload: false`` that lacks the kernel stops the run with a
one-line error naming the host, the image and the directory.
"""

from __future__ import annotations

import hashlib
import os
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from lab.errors import LabError
from lab.vm.libvirt.libvirt_conn import is_error, libvirt_module, short_error
from lab.vm.libvirt.libvirt_hostspec import HostSpec

CHUNK = 1 << 20
KERNEL_WAIT_S = 120.0  # another run uploading the same kernel to the same host


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


def ensure_pool(conn, name: str, path: str, perms: tuple[int, int, int] | None = None, build: bool = True):
    """An active dir pool ``name`` at ``path`` (transient; the directory and its files outlive it)."""
    libvirt = libvirt_module()
    for _attempt in range(3):
        try:
            pool = conn.storagePoolLookupByName(name)
        except libvirt.libvirtError as err:
            if not is_error(err, libvirt.VIR_ERR_NO_STORAGE_POOL):
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

"""The access-matrix TCG plugin (``images/plugins``): build it, map guest memory to nodes, make ``-plugin``.

The plugin counts sampled guest loads and stores by (vCPU, node owning the
accessed page). Which address a RAM access reports depends on the QEMU version:

* 8.2 and later: ``qemu_plugin_hwaddr_phys_addr`` is the guest-physical address.
  On q35 the RAM above ``lowmem`` (2 GiB when the machine has 2.75 GiB or more,
  else 2.75 GiB) is mapped from 4 GiB up.
* 5.1 to 8.1 (Debian 12's 7.2): it is the RAM block's offset in QEMU's internal
  RAM address space plus the block's offset in the machine's RAM container plus
  the offset in the block. numalab gives every node one memory backend, created
  in node order, so node k's block starts at base_k (the memory of the nodes
  before it) in both: node k shows up at [2 base_k, 2 base_k + size_k).

The plugin counts accesses that land in no node's range ("outside"); a run with
more than a trace of them used a wrong map and fails (``lab.analysis.access_counts``).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lab.errors import LabError
from lab.paths import COMPLETE, REPO_ROOT, TOOL_TEXT, cache_dir, publish_dir
from lab.topology.model.tiers import ram_below_4g
from lab.topology.model.topology import Topology

PLUGIN_SRC = REPO_ROOT / "images" / "plugins"
DEFAULT_SAMPLE = 64
DEFAULT_INTERVAL_MS = 200
GIB = 1 << 30
MIB = 1 << 20

_VERSION = re.compile(r"version (\d+)\.(\d+)")


def parse_qemu_version(text: str) -> tuple[int, int]:
    """``QEMU emulator version 7.2.22 (...)`` -> (7, 2)."""
    m = _VERSION.search(text)
    if not m:
        raise LabError(f"--access-matrix: cannot tell the QEMU version from {text.strip()!r}")
    return int(m.group(1)), int(m.group(2))


def plugin_api(version: tuple[int, int]) -> int:
    """The plugin API version to build for: QEMU 9.0 refuses 1 and accepts 2 (as do later ones)."""
    if version < (5, 1):
        raise LabError(
            f"--access-matrix: QEMU {version[0]}.{version[1]} has no qemu_plugin_hwaddr_phys_addr (5.1 or later needed)"
        )
    return 1 if version < (9, 0) else 2


def address_mode(version: tuple[int, int]) -> str:
    """How this QEMU reports RAM addresses: "ram-block" (5.1-8.1) or "guest-physical" (8.2+)."""
    return "ram-block" if version < (8, 2) else "guest-physical"


@dataclass(frozen=True)
class NodeRange:
    node: int
    start: int
    end: int  # exclusive

    def arg(self) -> str:
        return f"range={self.node}:{self.start:x}:{self.end:x}"


def node_ranges(topo: Topology, mode: str) -> list[NodeRange]:
    """The address ranges each node's RAM shows up at in the plugin, for ``mode`` (address_mode)."""
    out: list[NodeRange] = []
    base = 0
    lowmem = ram_below_4g(topo) * MIB  # (q35's; a tiered machine's ends where its first slow node starts)
    for node in topo.nodes:
        size = node.memory_mib * MIB
        if mode == "ram-block":
            out.append(NodeRange(node.id, 2 * base, 2 * base + size))
        elif mode == "guest-physical":
            lo_end = min(base + size, lowmem)
            if base < lowmem:
                out.append(NodeRange(node.id, base, lo_end))
            if base + size > lowmem:
                hi_start = max(base, lowmem)
                out.append(NodeRange(node.id, 4 * GIB + hi_start - lowmem, 4 * GIB + base + size - lowmem))
        else:
            raise ValueError(mode)
        base += size
    return out


def build_plugin(qemu_version: tuple[int, int], cc: str = "gcc") -> Path:
    """access_matrix.so built with the host compiler for this QEMU's plugin API, cached by sources + API."""
    api = plugin_api(qemu_version)
    srcs = sorted(p for p in PLUGIN_SRC.iterdir() if p.is_file())
    h = hashlib.sha256(f"api={api}".encode())
    for p in srcs:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    key = h.hexdigest()[:16]
    out = cache_dir("plugins") / key
    so = out / "access_matrix.so"
    if (out / ".complete").exists() and so.exists():
        return so
    if shutil.which(cc) is None:
        raise LabError(f"--access-matrix: {cc}: not found; the plugin is built with the host compiler (make setup)")
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{key}."))
    res = subprocess.run(
        ["make", "-s", "-C", str(PLUGIN_SRC), f"OUT={tmp}", f"API={api}", f"CC={cc}"],
        capture_output=True,
        **TOOL_TEXT,
    )
    if res.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        last = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise LabError(f"images/plugins: build failed: {last[0]}")
    (tmp / COMPLETE).touch()
    publish_dir(tmp, out)
    return so


def _opt(value: str) -> str:
    """A value inside a QEMU option string: commas are doubled."""
    return value.replace(",", ",,")


# The plugin's own options, which lead its -plugin value before the interval and the node map (the access matrix's
# output and sampling: the order records have always shown); the models' follow (lab.run.instrument).
LEADING = ("out", "sample")


def plugin_argument(
    so: Path, ranges: list[NodeRange], args: list[str] | tuple[str, ...] = (), interval_ms: int = DEFAULT_INTERVAL_MS
) -> str:
    """The value of QEMU's ``-plugin`` option: the plugin file, the instruments' ``args`` (KEY=VALUE, before ``,,``
    quoting; lab.run.instrument), the snapshot interval and the node map."""
    lead = [a for a in args if a.split("=", 1)[0] in LEADING]
    rest = [a for a in args if a.split("=", 1)[0] not in LEADING]
    parts = [f"file={so}", *lead, f"interval_ms={interval_ms}", *(r.arg() for r in ranges), *rest]
    return ",".join(map(_opt, parts))


def split_argument(argument: str) -> list[str]:
    """A -plugin value -> its KEY=VALUE parts (``,,`` is a comma inside a value)."""
    parts, cur, i = [], "", 0
    while i < len(argument):
        if argument[i] == ",":
            if argument[i + 1 : i + 2] == ",":
                cur += ","
                i += 2
                continue
            parts.append(cur)
            cur = ""
        else:
            cur += argument[i]
        i += 1
    return [*parts, cur]


def relocate(argument: str, so: str, out: str) -> str:
    """The same -plugin value with the plugin file and the output elsewhere (on a libvirt host)."""
    parts = []
    for p in split_argument(argument):
        key = p.split("=", 1)[0]
        parts.append({"file": f"file={so}", "out": f"out={out}"}.get(key, p).replace(",", ",,"))
    return ",".join(parts)


@dataclass(frozen=True)
class AccessPlugin:
    """The plugin as a run built it: the -plugin argument, where its counts go, and how it maps guest memory."""

    argument: str
    workdir: Path  # where the instruments' counts go (each its own file: lab.run.instrument)
    api: int
    mode: str
    qemu_version: str
    ranges: tuple[NodeRange, ...]

    def to_dict(self) -> dict:
        """The plugin's part of an instrument's record (the access matrix's ``plugin``, after its ``sample``)."""
        return {
            "plugin_api": self.api,
            "address_mode": self.mode,
            "qemu_version": self.qemu_version,
            "ranges": [{"node": r.node, "start": hex(r.start), "end": hex(r.end)} for r in self.ranges],
        }


ADDRESS_MODES = ("ram-block", "guest-physical")


def prepare(topo: Topology, args: list[str], workdir: Path, qemu_version_text: str, mode: str = "") -> AccessPlugin:
    """Build (or find) the plugin for the installed QEMU and make the run's -plugin argument of the instruments'
    ``args`` (lab.run.instrument), their counts going to ``workdir``.

    ``mode`` overrides the address map chosen from the version (tests use it to prove the self-check)."""
    version = parse_qemu_version(qemu_version_text)
    if mode and mode not in ADDRESS_MODES:
        raise LabError(f"--access-address-map {mode}: not one of {', '.join(ADDRESS_MODES)}")
    mode = mode or address_mode(version)
    ranges = node_ranges(topo, mode)
    so = build_plugin(version)
    argument = plugin_argument(so, ranges, args)
    return AccessPlugin(argument, workdir, plugin_api(version), mode, qemu_version_text, tuple(ranges))

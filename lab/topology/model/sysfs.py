"""One reader of sysfs's CPU and node files (a copy of /sys/devices/system), with an explicit :class:`Trust`.

Three callers read the same files and trust them differently: ``numalab topo import`` refuses a copy with a
bad or missing file (STRICT: a one-line :class:`LabError` naming the file); this host's placement takes what
it can read and leaves out the rest (BEST_EFFORT); a guest's copy is believed only within its bounds, and what
is wrong with it is named in ``problems``, never raised (UNTRUSTED, as lab.untrusted reads a guest's files).

The files are a :class:`SysfsFiles`: a directory, or a guest's ``grep -H`` dump (:func:`grep_files`), each
file by its path below the root (``cpu0/topology/core_id``). Per CPU: ``topology/`` (physical_package_id,
die_id, cluster_id, core_id, thread_siblings_list) and ``cache/index*`` (level, type, shared_cpu_list, id,
size) (:func:`read_cpu`); per node: cpulist, distance and meminfo (:func:`read_node`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from lab.cpulist import MAX_CPU_ID, checked_cpulist
from lab.errors import LabError
from lab.untrusted import shown, to_int

MAX_TEXT = 1 << 16  # characters of one file: a list of every CPU of 8192 ("0,2,4,..."), with room to spare
MAX_INDEX = 99  # cache/indexN: a CPU has a handful
CACHE_TYPES = ("Data", "Instruction", "Unified")  # the kernel's cacheinfo type_show
TOPOLOGY_FILES = ("physical_package_id", "die_id", "cluster_id", "core_id", "thread_siblings_list")
CACHE_FILES = ("shared_cpu_list", "id", "size")  # (level and type are always read)


class Trust(Enum):
    """How far a sysfs copy is believed."""

    STRICT = "strict"  # numalab topo import: a bad or missing file is a LabError naming the file
    BEST_EFFORT = "best effort"  # this host, for placement: what cannot be read is left out, silently
    UNTRUSTED = "untrusted"  # a guest's copy: bounded, what is wrong named in problems, never raised


class SysfsFiles:
    """A sysfs tree's text files by their path below its root (``cpu0/topology/core_id``): a directory
    (``root``), or a mapping path -> (text, where the text came from) (``texts``, see :func:`grep_files`)."""

    def __init__(self, root: Path | None = None, texts: dict[str, tuple[str, str]] | None = None) -> None:
        assert (root is None) != (texts is None), "a directory or texts"
        self.root = root
        self.texts = texts or {}
        self._dirs: dict[str, set[str]] = {}
        for rel in self.texts:  # (each folder's entries, as a directory lists them)
            parts = rel.split("/")
            for i in range(len(parts)):
                self._dirs.setdefault("/".join(parts[:i]), set()).add(parts[i])

    def where(self, rel: str) -> str:
        """The file's name for a message: its path, or where its text came from (``cpus.txt line 12``)."""
        if self.root is not None:
            return str(self.root / rel)
        return self.texts[rel][1] if rel in self.texts else rel

    def exists(self, rel: str) -> bool:
        if self.root is not None:
            return (self.root / rel).exists()
        return rel in self.texts or rel in self._dirs

    def is_dir(self, rel: str) -> bool:
        return (self.root / rel).is_dir() if self.root is not None else rel in self._dirs

    def numbered(self, rel: str, prefix: str) -> list[int]:
        """The N of the entries ``rel/PREFIXN`` (``cpu0``, ``index3``), in order."""
        if self.root is not None:
            folder = self.root / rel
            names = [p.name for p in folder.glob(f"{prefix}[0-9]*")] if folder.is_dir() else []
        else:
            names = list(self._dirs.get(rel, ()))
        ids = {n[len(prefix) :] for n in names if n.startswith(prefix)}
        return sorted(int(n) for n in ids if n.isdigit() and len(n) <= 5)

    def raw(self, rel: str) -> str:
        """The file's text, at most MAX_TEXT + 1 characters; OSError (FileNotFoundError when it is not there) or
        UnicodeDecodeError when it cannot be read."""
        if self.root is None:
            if rel not in self.texts:
                raise FileNotFoundError(2, "No such file or directory")
            return self.texts[rel][0][: MAX_TEXT + 1]
        with open(self.root / rel, "rb") as f:
            return f.read(MAX_TEXT + 1).decode("utf-8")


# A guest's grep -H lines of its CPUs' files (images/guest/init): PATH:VALUE
_GREP_LINE = re.compile(
    r".*/cpu(\d{1,5})/(topology/(?:physical_package_id|die_id|cluster_id|core_id|thread_siblings_list)"
    r"|cache/index(\d{1,2})/(level|type|shared_cpu_list|id|size)):(.*)$"
)


def grep_files(lines: Iterable[tuple[int, str]], label: str, problems: list[str]) -> SysfsFiles:
    """The CPU files a guest's ``grep -H`` dump holds (numbered lines of ``/sys/devices/system/cpu/cpuN/...:VALUE``)
    as a :class:`SysfsFiles` whose files are named ``LABEL line N``; other lines are not its files and are left
    out, a CPU beyond MAX_CPU_ID is named in ``problems``. A file given twice is the later line."""
    texts: dict[str, tuple[str, str]] = {}
    for n, line in lines:
        m = _GREP_LINE.match(line)
        if not m:
            continue
        cpu = int(m.group(1))
        if cpu > MAX_CPU_ID:
            problems.append(f"{label} line {n}: cpu {cpu} is not a CPU")
            continue
        rel = m.group(2) if m.group(3) is None else f"cache/index{int(m.group(3))}/{m.group(4)}"
        texts[f"cpu{cpu}/{rel}"] = (m.group(5), f"{label} line {n}")
    return SysfsFiles(texts=texts)


# What a value of each kind is, and how a STRICT read says it is not one.
_KIND_ERRORS = {
    "int": "not a whole number: {text!r}",
    "cpus": "cannot read the CPU list {text!r}",
    "cpulist": "cannot read the CPU list {text!r}",
    "nodelist": "cannot read the node list {text!r}",
    "type": "not a cache type ({types}): {text!r}",
    "size": "not a cache size (NK): {text!r}",
    "row": "not a row of numbers: {text!r}",
}
_SIZE = re.compile(r"\d{1,10}K")


def _ascending(text: str) -> bool:
    """Whether a cpulist's ranges go up without overlapping, as the kernel writes them (so that it holds at most
    MAX_CPU_ID + 1 CPUs, however long the text)."""
    last = -1
    for part in text.strip().split(","):
        if part:
            lo, _, hi = part.partition("-")
            if int(lo) <= last:
                return False
            last = int(hi or lo)
    return True


def _parse(kind: str, text: str, trust: Trust) -> object:
    """``text`` as a value of ``kind``, None if it is not one."""
    s = text.strip()
    if kind == "int":
        return to_int(s)
    if kind in ("cpus", "cpulist", "nodelist"):
        ids = checked_cpulist(s)
        if ids is None or (trust is Trust.UNTRUSTED and not _ascending(s)):
            return None
        return None if kind == "cpus" and trust is Trust.STRICT and not ids else tuple(ids)
    if kind == "type":
        return s if s in CACHE_TYPES else None
    if kind == "size":  # cacheinfo's "32768K"
        return s if _SIZE.fullmatch(s) else None
    assert kind == "row"
    row = tuple(to_int(x) for x in s.split())
    return None if None in row or len(row) > MAX_CPU_ID else row


class SysfsReader:
    """Reads :class:`SysfsFiles` under a :class:`Trust`; UNTRUSTED names what is wrong in ``problems``."""

    def __init__(self, files: SysfsFiles, trust: Trust, problems: list[str] | None = None) -> None:
        self.files = files
        self.trust = trust
        self.problems = [] if problems is None else problems

    def _bad(self, rel: str, why: str) -> None:
        """A file that cannot be believed: STRICT raises, UNTRUSTED names it, BEST_EFFORT leaves it out."""
        if self.trust is Trust.STRICT:
            raise LabError(f"{self.files.where(rel)}: {why}")
        if self.trust is Trust.UNTRUSTED:
            self.problems.append(f"{self.files.where(rel)}: {why}")

    def text(self, rel: str, required: bool = True) -> str | None:
        """The file's text; None when it cannot be read, or is not there (STRICT: unless ``required``)."""
        if not required and not self.files.exists(rel):
            return None
        try:
            text = self.files.raw(rel)
        except FileNotFoundError as err:
            if self.trust is Trust.STRICT:
                raise LabError(f"{self.files.where(rel)}: cannot read ({err.strerror or err})") from None
            return None
        except OSError as err:
            self._bad(rel, f"cannot read ({err.strerror or err})")
            return None
        except UnicodeDecodeError:
            self._bad(rel, "not text")
            return None
        if len(text) > MAX_TEXT:
            self._bad(rel, f"more than {MAX_TEXT} characters")
            return None
        return text

    def value(self, rel: str, kind: str, required: bool = True) -> Any:
        """The file's value of ``kind`` (int, cpus: a CPU list that STRICT wants not empty, cpulist, nodelist,
        type, size, row: of whole numbers), None when it is not there or not one (STRICT: a LabError, unless
        it is not there and not ``required``)."""
        text = self.text(rel, required)
        if text is None:
            return None
        value = _parse(kind, text, self.trust)
        if value is None:
            if self.trust is Trust.UNTRUSTED:  # (a file's own newline is not shown)
                said = shown(text.removesuffix("\n"))
                self.problems.append(f"{self.files.where(rel)}: {said} is not a {rel.rpartition('/')[2]}")
            else:
                shown_text = " ".join(text.split()) if kind == "row" else text.strip()[:40]
                self._bad(rel, _KIND_ERRORS[kind].format(text=shown_text, types=", ".join(CACHE_TYPES)))
        return value


@dataclass(frozen=True)
class CacheFacts:
    """One ``cache/indexN`` of a CPU: what each of its files says, None for a file not there or not believed."""

    index: int
    level: int | None
    type: str | None  # Data, Instruction or Unified
    shared_cpus: tuple[int, ...] | None
    id: int | None = None
    size: str | None = None  # "32768K"

    @property
    def name(self) -> str:
        """``L1d``, ``L1i``, ``L2``... (a cache of no known type: its level alone)."""
        suffix = {"Data": "d", "Instruction": "i"}.get(self.type or "", "")
        return f"L{self.level}{suffix}"


@dataclass(frozen=True)
class CpuFacts:
    """One CPU's ``topology/`` and ``cache/`` files: None for a file not there or not believed."""

    cpu: int
    package: int | None
    die: int | None
    cluster: int | None
    core: int | None
    thread_siblings: tuple[int, ...] | None
    caches: tuple[CacheFacts, ...] | None  # None: no cache/ directory

    @property
    def ids(self) -> dict[str, object]:
        """The topology files it has, by their short names (package, die, cluster, core, thread_siblings)."""
        named = zip(("package", "die", "cluster", "core", "thread_siblings"), (
            self.package, self.die, self.cluster, self.core, self.thread_siblings))  # fmt: skip
        return {k: v for k, v in named if v is not None}


def read_caches(reader: SysfsReader, cpu: int, files: tuple[str, ...] = CACHE_FILES) -> tuple[CacheFacts, ...] | None:
    """CPU ``cpu``'s ``cache/index*``: level and type, and those of ``files`` (shared_cpu_list, id, size) it has;
    None without a ``cache/`` directory. STRICT wants level, type and shared_cpu_list (if in ``files``)."""
    folder = f"cpu{cpu}/cache"
    if not reader.files.is_dir(folder):
        return None
    out = []
    for i in reader.files.numbered(folder, "index"):
        if i > MAX_INDEX:
            continue
        d = f"{folder}/index{i}"
        strict = reader.trust is Trust.STRICT
        level = reader.value(f"{d}/level", "int", required=strict)
        kind = reader.value(f"{d}/type", "type", required=strict)
        got = {f: reader.value(f"{d}/{f}", _CACHE_KINDS[f], required=strict and f == "shared_cpu_list")
               for f in files}  # fmt: skip
        out.append(CacheFacts(i, level, kind, got.get("shared_cpu_list"), got.get("id"), got.get("size")))
    return tuple(out)


_CACHE_KINDS = {"shared_cpu_list": "cpus", "id": "int", "size": "size"}


def read_cpu(reader: SysfsReader, cpu: int, cache_files: tuple[str, ...] = CACHE_FILES) -> CpuFacts:
    """CPU ``cpu``'s topology ids, thread siblings and caches (:func:`read_caches`, with ``cache_files``). STRICT
    wants physical_package_id, and core_id when there is no thread_siblings_list (an older kernel's)."""
    top = f"cpu{cpu}/topology"
    strict = reader.trust is Trust.STRICT
    package = reader.value(f"{top}/physical_package_id", "int", required=strict)
    die = reader.value(f"{top}/die_id", "int", required=False)
    cluster = reader.value(f"{top}/cluster_id", "int", required=False)
    siblings = reader.value(f"{top}/thread_siblings_list", "cpus", required=False)
    without_siblings = not reader.files.exists(f"{top}/thread_siblings_list")
    core = reader.value(f"{top}/core_id", "int", required=strict and without_siblings)
    return CpuFacts(cpu, package, die, cluster, core, siblings, read_caches(reader, cpu, cache_files))


@dataclass(frozen=True)
class NodeFacts:
    """One ``nodeN`` directory: its CPUs, its meminfo's ``KEY: N kB`` values, its SLIT row (None: not read)."""

    node: int
    cpus: tuple[int, ...] | None
    meminfo_kb: dict[str, int] | None
    distances: tuple[int, ...] | None


_MEMINFO = re.compile(r"([A-Za-z][\w()]{0,40}):\s*(\d{1,20})\s*kB")


def read_node(reader: SysfsReader, node: int) -> NodeFacts:
    """Node ``node``'s cpulist (it may be empty), meminfo and distance (all three wanted by STRICT)."""
    d = f"node{node}"
    cpus = reader.value(f"{d}/cpulist", "cpulist")
    text = reader.text(f"{d}/meminfo")
    meminfo = {k: int(v) for k, v in _MEMINFO.findall(text)} if text is not None else None
    distances = reader.value(f"{d}/distance", "row")
    return NodeFacts(node, cpus, meminfo, distances)

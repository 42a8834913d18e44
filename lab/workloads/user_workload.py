"""A user's own workload: a workload file (``numalab run --workload FILE.yaml``) or the one-off
``--workload-cmd CMD [--workload-file PATH]...``, read and checked on the host before any boot.

::

    name: my-repro                      # optional; the file's stem otherwise
    command: ./repro --threads {cpus} --seconds {duration}
    files: [repro]                      # copied to the guest's /workload (its working directory), relative to this file
    tools: [/usr/bin/taskset]           # host binaries, copied with their shared-library closure
    packages: [rt-tests]                # Debian packages (installed on the host): their programs, as tools
    results:
      json-line: "REPRO_RESULT "        # a line starting with this, then a JSON object
      # or regex: {ops_per_s: 'ops/s: ([0-9.]+)'}   (one group each; the last match)
    metrics:
      - {name: ops_per_s, unit: 1/s, higher_is_better: true, mean: hmean, min_effect: 2%}

The command runs under the guest's busybox ``sh`` in ``/workload``, with ``/workload`` first in ``PATH``;
``{cpus}``, ``{nodes}``, ``{mem_mib}`` and ``{duration}`` are the guest's CPUs, NUMA nodes, the MiB a
workload may touch (35% of guest memory, as the built-ins) and the run's duration in seconds.

The fields' types, ranges and names are checked against ``lab/schemas/workload.schema.json``; every error is one
line naming the file and the field: a field of the wrong type, a file that is missing, a dynamically linked program
whose libraries the host lacks, a package that is not installed, a script whose interpreter the guest does
not have.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from lab import schemas
from lab.datafile import load_yaml, read_bytes
from lab.errors import LabError
from lab.guest.image import GUEST_DIR
from lab.min_effect import parse_pct
from lab.paths import TOOL_TEXT, resolved
from lab.topology.model.topology import Topology
from lab.untrusted import shown
from lab.workloads.elf import elf_interpreter, ldd_closure
from lab.workloads.registry import builtin_metric, get_workload
from lab.workloads.workload_output import user_pattern
from lab.workloads.workload_type import MEM_SHARE, UserMetric, UserSpec, Workload

KEYS = tuple(schemas.load_schema("workload")["properties"])  # the fields a workload file may have
PLACEHOLDERS = re.compile(r"\{(cpus|nodes|mem_mib|duration)\}")
MAX_FILE_BYTES = 256 << 20  # one file carried into the guest (every MB costs a TCG boot ~10 ms)
BIN_DIRS = ("/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/")
# Interpreters a script may name: the base image's busybox sh.
GUEST_SHELLS = ("/bin/sh", "/bin/ash", "/bin/busybox")


def is_workload_file(name: str) -> bool:
    """Whether ``--workload NAME`` names a workload file rather than a built-in."""
    return name.endswith((".yaml", ".yml"))


def resolve_workload(name: str, cmd: str = "", files: tuple[str, ...] = ()) -> Workload:
    """The workload ``numalab run`` asks for: ``--workload-cmd`` (with its ``--workload-file``s), a workload
    file, or a built-in; one-line errors."""
    if cmd:
        return command_workload(cmd, files)
    if files:
        raise LabError("--workload-file: only with --workload-cmd (a workload file lists its own files)")
    if is_workload_file(name):
        return load_workload_file(Path(name))
    return get_workload(name)


def _placeholder_command(template: str) -> Callable[[Topology, float], str]:
    def cmd(topo: Topology, duration: float) -> str:
        values = {
            "cpus": str(topo.total_cpus),
            "nodes": str(len(topo.nodes)),
            "mem_mib": str(max(8, int(topo.total_memory_mib * MEM_SHARE))),
            "duration": f"{duration:g}",
        }
        filled = PLACEHOLDERS.sub(lambda m: values[m.group(1)], template)
        return f"cd /{GUEST_DIR} && PATH=/{GUEST_DIR}:$PATH && {filled}"

    return cmd


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_+-]+", "-", text).strip("-")[:48] or "workload"


def command_workload(cmd: str, files: tuple[str, ...]) -> Workload:
    """``--workload-cmd CMD [--workload-file PATH]...``: a NUMALAB_RESULT JSON line, each number a metric
    (higher is better: the command line cannot say otherwise; a workload file can)."""
    if not cmd.strip() or "\n" in cmd or "\0" in cmd:
        raise LabError("--workload-cmd: expected one non-empty line of shell")
    carried = _files([str(f) for f in files], Path.cwd(), "--workload-file")
    digest = hashlib.sha256(cmd.encode() + b"\0" + b"\0".join(_sha_file(h).encode() for h, _ in carried))
    spec = UserSpec("--workload-cmd", digest.hexdigest(), cmd, carried, _closures(carried, (), "--workload-file"),
                    (), json_prefix="NUMALAB_RESULT ", all_numeric=True)  # fmt: skip
    return Workload("cmd", "--workload-cmd", _placeholder_command(cmd), "user", programs=(), metrics=(), user=spec)


def _sha_file(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_workload_file(path: Path) -> Workload:
    """A workload file, checked whole (one-line errors starting with its path and naming the field)."""
    data = read_bytes(path, "workload file")
    try:
        return _parse(load_yaml(path, "workload file"), path, hashlib.sha256(data).hexdigest())
    except LabError as err:
        text = str(err)
        raise LabError(text if text.startswith(f"workload file {path}") else f"workload file {path}: {text}") from None


def _parse(data: object, path: Path, sha256: str) -> Workload:
    data = schemas.check(data, "workload")  # (types, required and unknown fields, the name's and metrics' shapes)
    command = data["command"]
    name = data.get("name", _slug(path.stem))
    base = resolved(path, f"workload file {path}").parent
    files = _files(data.get("files") or [], base, "files")
    tools = [_tool(t, f"tools[{i}]") for i, t in enumerate(data.get("tools") or [])]
    packages = data.get("packages") or []
    for i, pkg in enumerate(packages):
        tools += [t for t in package_programs(pkg, f"packages[{i}]") if t not in tools]
    metrics = _metrics(data["metrics"])
    prefix, regex = _results(data["results"], {m.name for m in metrics})
    spec = UserSpec(str(path), sha256, command, files, _closures(files, tuple(tools), "files"), tuple(packages),
                    json_prefix=prefix, regex=regex, metrics=metrics)  # fmt: skip
    _check_scripts(spec)
    description = data.get("description", f"workload file {path.name}")
    return Workload(name, str(description)[:200], _placeholder_command(command), "user", programs=(), metrics=(),
                    user=spec)  # fmt: skip


def _files(names: list[str], base: Path, field: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    for i, name in enumerate(names):
        where = f"{field}[{i}] {name}" if field == "files" else f"{field} {name}"
        host = resolved(base / name, where)
        if not host.is_file():
            if host.exists():  # (a FIFO would block the image build; a link to /dev/zero never ends)
                raise LabError(f"{where}: {_kind(host)}, not a regular file")
            raise LabError(f"{where}: no such file" + (f" (relative to {base})" if field == "files" else ""))
        size = host.stat().st_size
        if size > MAX_FILE_BYTES:
            raise LabError(f"{where}: {size:,} bytes, more than the {MAX_FILE_BYTES >> 20} MiB a file may have")
        guest = host.name
        if any(g == guest for _, g in out):
            raise LabError(f"{where}: another file is also called {guest} in the guest's /{GUEST_DIR}")
        out.append((str(host), guest))
    return tuple(out)


def _kind(path: Path) -> str:
    """What a path that is not a regular file is (its link resolved): for a one-line error."""
    mode = path.stat().st_mode
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((what for test, what in kinds if test(mode)), "a special file")


def _tool(name: str, where: str) -> str:
    """A host binary by path or by name (looked up in PATH), resolved to the path the guest gets it at."""
    found = name if name.startswith("/") else shutil.which(name)
    if not found or not Path(found).is_file():
        raise LabError(f"{where} {name}: not found on the host")
    return found


def package_programs(package: str, where: str) -> list[str]:
    """The programs (in /usr/bin, /usr/sbin, /bin, /sbin) of a Debian package installed on the host."""
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]{0,99}", package):
        raise LabError(f"{where}: {package!r} is not a Debian package name")
    try:
        proc = subprocess.run(["dpkg-query", "-L", package], capture_output=True, **TOOL_TEXT, timeout=30)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        raise LabError(f"{where} {package}: cannot ask dpkg-query (packages: only on a Debian host)") from None
    if proc.returncode != 0:
        raise LabError(f"{where} {package}: not installed on the host (apt-get install {package}), or no such package")
    programs = sorted(
        line for line in proc.stdout.splitlines()
        if f"{Path(line).parent}/" in BIN_DIRS and Path(line).is_file()
    )  # fmt: skip
    if not programs:
        raise LabError(f"{where} {package}: the package has no program in {', '.join(BIN_DIRS)}")
    return programs


def _head(path: str, n: int) -> bytes:
    """The first ``n`` bytes of a file (a workload's file may be large: only its header is looked at here)."""
    with open(path, "rb") as f:
        return f.read(n)


def _closures(files: tuple[tuple[str, str], ...], tools: tuple[str, ...], field: str) -> tuple[str, ...]:
    """The tools; every dynamically linked file and tool must have its libraries on the host (ldd resolves
    them; lab.workloads.image_layers has lab.guest.image copy them in)."""
    for i, (host, _guest) in enumerate(files):
        interp = elf_interpreter(_head(host, 1 << 20))
        if interp is not None:
            where = f"{field}[{i}] {Path(host).name}" if field == "files" else f"{field} {host}"
            if not Path(interp).exists():
                raise LabError(f"{where}: dynamically linked, and its loader {interp} is not on the host "
                               "(link it with -static)")  # fmt: skip
            try:
                ldd_closure(host)
            except LabError as err:
                raise LabError(f"{where}: dynamically linked: {str(err).split(': ', 1)[-1]}") from None
    for t in tools:
        ldd_closure(t)
    return tools


def _check_scripts(spec: UserSpec) -> None:
    """A script carried in must name an interpreter the guest has (busybox sh, or one of the tools)."""
    for i, (host, _guest) in enumerate(spec.files):
        head = _head(host, 256)
        if not head.startswith(b"#!"):
            continue
        words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
        interp = words[0] if words else ""
        if interp == "/usr/bin/env" and len(words) > 1:
            interp = words[1]
        if interp in GUEST_SHELLS or interp in ("sh", "ash") or interp in spec.tools:
            continue
        raise LabError(f"files[{i}] {Path(host).name}: its interpreter {interp} is not in the guest "
                       "(busybox sh is; add the interpreter under tools:)")  # fmt: skip


def _metrics(raw: list[dict]) -> tuple[UserMetric, ...]:
    """The declared metrics (the schema has checked each one's fields: the name a word as RESULT_KEY takes)."""
    out: list[UserMetric] = []
    for i, m in enumerate(raw):
        name = m["name"]
        if any(o.name == name for o in out):
            raise LabError(f"metrics[{i}].name: {name} is declared twice")
        if (builtin := builtin_metric(name)) is not None:
            better = "higher" if name != builtin.name else builtin.better
            raise LabError(f"metrics[{i}].name: {name} is a built-in metric ({better} is better); leave it out of "
                           "metrics: (a result with it is compared already)")  # fmt: skip
        effect = None if m.get("min_effect") is None else parse_pct(m["min_effect"], f"metrics[{i}].min_effect")
        out.append(UserMetric(name, m.get("unit", ""), m["higher_is_better"], m.get("mean", "amean"), effect))
    _check_twins(out)
    return tuple(out)


def _check_twins(metrics: list[UserMetric]) -> None:
    """A declared rate's per-vCPU-second twin is numalab's to compute: no other metric may have its name."""
    names = {m.name: i for i, m in enumerate(metrics)}
    for m in metrics:
        if m.twin_key is not None and m.twin_key in names:
            raise LabError(f"metrics[{names[m.twin_key]}].name: {m.twin_key} is the per-vCPU-second twin numalab "
                           f"computes for the rate {m.name} ({m.unit}); call it something else")  # fmt: skip
        if m.twin_key is not None and builtin_metric(m.twin_key) is not None:
            raise LabError(f"metrics[{names[m.name]}].name: the rate {m.name}'s per-vCPU-second twin would be "
                           f"{m.twin_key}, a built-in metric; call it something else")  # fmt: skip


def _results(raw: dict, names: set[str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The result's reader (the schema: exactly one of json-line, a non-blank prefix, and regex, patterns)."""
    kind, value = next(iter(raw.items()))
    if kind == "json-line":
        if "\n" in value:  # (the schema's pattern is checked with Python's re, whose $ matches before a last \n)
            raise LabError(f"results.json-line: expected the prefix of the result line, got {value!r}")
        return value, ()
    pairs = []
    for metric, pattern in value.items():
        if metric not in names:
            raise LabError(f"results.regex.{metric}: not a metric declared under metrics:")
        try:
            groups = user_pattern(pattern).groups
        except ValueError as err:
            raise LabError(
                f"results.regex.{metric}: not a regular expression RE2 can run: {shown(pattern, 60)} "
                f"({err}; result patterns run in linear time: no backreferences or lookaround)"
            ) from None
        if groups != 1:
            raise LabError(f"results.regex.{metric}: needs exactly one group (the number), has {groups}")
        pairs.append((str(metric), pattern))
    missing = sorted(names - {m for m, _ in pairs})
    if missing:
        raise LabError(f"metrics: {missing[0]} has no pattern under results.regex")
    return "", tuple(pairs)

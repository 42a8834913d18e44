"""What a run's workload needs in the guest image, worked out on the host and handed to lab.guest.image, which
lays out what it is given: the host tools a run uses (the trace's, then the workload's) with their shared-library
closures, and a user's workload's files with the closures of those that are dynamically linked (lab.workloads.elf).
"""

from __future__ import annotations

from pathlib import Path

from lab.errors import LabError
from lab.guest import image
from lab.workloads.elf import elf_interpreter, ldd_closure
from lab.workloads.registry import BUILTIN_TOOLS
from lab.workloads.workload_type import UserSpec, Workload

# Host tools a guest may need, by name: the binary; a run takes only those it uses (tools_for). trace-cmd
# for the trace modes that run it, then every tool a built-in workload's folder names (lab.workloads.registry).
GUEST_TOOLS = {"trace-cmd": image.TRACE_CMD, **BUILTIN_TOOLS}


def tools_for(workload: Workload, trace_mode: str, tracing: bool) -> tuple[str, ...]:
    """The GUEST_TOOLS a run uses: the trace's (lab.guest.image.trace_tools), then the ones its workload
    declares (perf for perf bench)."""
    tools = list(image.trace_tools(trace_mode, tracing))
    tools += [t for t in workload.tools if t not in tools]
    return tuple(tools)


def programs_for(workload: Workload) -> tuple[str, ...]:
    """The lab's own programs the workload declares, each checked to be one images/workloads builds."""
    return image.workload_binaries(workload.programs, workload.name)


def tool_layer(name: str) -> Path:
    """One of GUEST_TOOLS and its shared-library closure, as a layer over the base (cached)."""
    if name not in GUEST_TOOLS:
        raise LabError(f"guest tool {name!r}: unknown (known: {', '.join(GUEST_TOOLS)})")
    binary = GUEST_TOOLS[name]
    if not Path(binary).exists():
        raise LabError(f"{binary}: not found on the host; install it (make setup)")
    return image.tool_image(name, [binary, *ldd_closure(binary)])


def _once(paths: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(paths))


def user_layer(spec: UserSpec | None) -> Path | None:
    """A user's workload (lab.workloads.user_workload): its files in /workload, its tools at their host paths,
    and the shared-library closure of each that is dynamically linked, as a layer (cached by content); None
    for a built-in workload."""
    if spec is None:
        return None
    host_files: list[str] = []
    for host, _guest in spec.files:
        with open(host, "rb") as f:
            if elf_interpreter(f.read(1 << 20)) is not None:
                host_files += ldd_closure(host)
    for tool in spec.tools:
        host_files += [tool, *ldd_closure(tool)]
    return image.user_image(spec.files, _once(host_files))

"""The QEMU command line for a topology + placement + boot spec.

Pure functions, no I/O: the backend (``lab.vm.qemu.qemu_backend``) runs what this
builds, and golden files under ``tests/golden/qemu`` pin it down.
"""

from __future__ import annotations

from collections.abc import Sequence

from lab.errors import LabError
from lab.placement.pinning import Placement
from lab.topology.model.cpu_grid import CPUID_VENDOR_IDS
from lab.topology.model.tiers import max_ram_below_4g
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import smp_layout
from lab.vm.backend import BootSpec

ACCELS = ("kvm", "tcg")


def opt_value(value: str) -> str:
    """A value inside a QEMU ``key=value,...`` option: a comma doubled, as QEMU's option parser reads it
    (``path=/a,b`` would end the path at the comma and make ``b`` an option)."""
    return value.replace(",", ",,")


def _backend_object(topo: Topology, placement: Placement, node: int) -> str:
    b = placement.backing
    size = topo.nodes[node].memory_mib
    host = placement.memory_host_nodes[node]
    if b.kind == "ram":
        obj = f"memory-backend-ram,id=mem{node},size={size}M"
    elif b.kind == "memfd":
        obj = f"memory-backend-memfd,id=mem{node},size={size}M"
    else:
        obj = f"memory-backend-file,id=mem{node},size={size}M,mem-path={opt_value(b.hugepage_path)}"
    obj += f",host-nodes={host},policy=bind"
    if b.prealloc or b.kind == "hugepages":
        obj += ",prealloc=on"
    return obj


def check_firmware_can_boot(topo: Topology, rom: str, version: tuple[int, ...] | None) -> None:
    """QEMU 10 aborts under SeaBIOS (``rom`` "") on a grid with several dies or modules a package and Intel's
    vendor (``encode_topo_cpuid1f: Assertion 'count <= CPU_TOPOLOGY_LEVEL_SOCKET' failed``, 0.2 s in, before the
    kernel; qboot boots it): a one-line error instead of a boot-failed run."""
    grid = topo.cpu_grid
    if grid is None or rom or version is None or tuple(version[:2]) < (9, 0) or grid.vendor == "amd":
        return
    if grid.dies_per_package > 1 or grid.has_clusters:
        raise LabError(
            f"topology {topo.name}: QEMU {'.'.join(map(str, version[:3]))} aborts under SeaBIOS on a machine with "
            "several dies or modules a package and Intel's CPUID (encode_topo_cpuid1f); boot it with "
            "--firmware qboot (the default, --firmware auto)"
        )


def _smp(topo: Topology) -> str:
    grid = topo.cpu_grid
    if grid is None:
        smp = smp_layout(topo)
        return f"{topo.total_cpus},sockets={smp.sockets},cores={smp.cores},threads={smp.threads}"
    modules = f",modules={grid.clusters_per_die}" if grid.has_clusters else ""
    return (
        f"{topo.total_cpus},sockets={grid.packages},dies={grid.dies_per_package}{modules},"
        f"cores={grid.cores_per_cluster},threads={grid.threads}"
    )


def _cpu_ids(topo: Topology, vcpu: int) -> str:
    """-numa cpu's ids of ``vcpu`` (QEMU's x86 names: a cluster is a module). A die-id only with several dies a
    package, a module-id only with several modules a die: QEMU refuses one its CPU slots do not have ("die-id is
    not supported": x86 slots have a die id only when dies > 1)."""
    grid = topo.cpu_grid
    if grid is None:
        s, c, t = smp_layout(topo).place(vcpu)
        return f"socket-id={s},core-id={c},thread-id={t}"
    p = grid.place(vcpu)
    die = f",die-id={p['die']}" if grid.dies_per_package > 1 else ""
    module = f",module-id={p['cluster']}" if grid.has_clusters else ""
    return f"socket-id={p['package']}{die}{module},core-id={p['core']},thread-id={p['thread']}"


def topology_args(topo: Topology, placement: Placement) -> list[str]:
    """-m, -smp, memory backends, -numa node/cpu/dist. A memoryless node has no backend: ``-numa node`` without
    ``memdev`` is a node with CPUs and no memory."""
    args = ["-m", f"{topo.total_memory_mib}M", "-smp", _smp(topo)]
    for node in topo.nodes:
        if node.memory_mib:
            args += ["-object", _backend_object(topo, placement, node.id)]
    tiers = topo.tiers
    for node in topo.nodes:
        init = tiers.initiator_of(node.id) if tiers and tiers.hmat else None
        memdev = f",memdev=mem{node.id}" if node.memory_mib else ""
        args += ["-numa", f"node,nodeid={node.id}{memdev}" + (f",initiator={init}" if init is not None else "")]
    for node, vcpus in zip(topo.nodes, topo.node_cpus()):
        for vcpu in vcpus:
            args += ["-numa", f"cpu,node-id={node.id},{_cpu_ids(topo, vcpu)}"]
    sym = topo.is_symmetric()
    n = topo.n_nodes
    for i in range(n):
        for j in range(n):
            if i != j and (not sym or i < j):
                args += ["-numa", f"dist,src={i},dst={j},val={topo.distances[i][j]}"]
    return args + hmat_args(topo)


def hmat_args(topo: Topology) -> list[str]:
    """-numa hmat-lb: access latency (ns) and bandwidth (MiB/s) from every CPU node to every node
    (lab.topology.model.tiers); the machine needs hmat=on (machine_option)."""
    tiers = topo.tiers
    if not tiers or not tiers.hmat:
        return []
    args = []
    for row, init in enumerate(topo.cpu_nodes):
        for target in range(topo.n_nodes):
            base = f"hmat-lb,initiator={init},target={target},hierarchy=memory"
            args += ["-numa", f"{base},data-type=access-latency,latency={tiers.latency_ns[row][target]}"]
            args += ["-numa", f"{base},data-type=access-bandwidth,bandwidth={tiers.bandwidth_mib[row][target]}M"]
    return args


def machine_option(topo: Topology) -> str:
    """-machine: q35, with the ACPI HMAT when the topology has one, and a cluster's cores sharing their L2
    (QEMU 9.2's smp-cache; without it each x86 core keeps its own L2)."""
    opt = "q35,hmat=on" if topo.tiers and topo.tiers.hmat else "q35"
    below = max_ram_below_4g(topo)
    if below is not None:  # (the slow nodes above 4 GiB, clear of the firmware: lab.topology.model.tiers)
        opt += f",max-ram-below-4g={below}M"
    if topo.cpu_grid is not None and topo.cpu_grid.has_clusters:
        opt += ",smp-cache.0.cache=l2,smp-cache.0.topology=module"
    return opt


def cpu_model(topo: Topology, boot: BootSpec) -> list[str]:
    """TCG's -cpu: the boot's model (the nested tier's ``max``) as it is; on a machine with a CPU grid, QEMU's
    default model shown with the grid's vendor (Intel unless the spec says amd: the guest then reads its LLC from
    CPUID leaf 4, which QEMU shares among a die's CPUs) and the spec's family and model if it gives them (QEMU
    7.2 and 10 take ``family=``/``model=`` on qemu64); else QEMU's default."""
    grid = topo.cpu_grid
    if boot.cpu:
        if grid is not None and grid.cpu_model:
            raise LabError(
                f"topology {topo.name}: cpu_model: this boot's CPU is -cpu {boot.cpu} (the nested tier's outer guest), "
                f"which shows its own family and model, not {grid.cpu_model_text}; run the topology directly"
            )
        return ["-cpu", boot.cpu]
    if grid is None:
        return []
    model = f",family={grid.cpu_model[0]},model={grid.cpu_model[1]}" if grid.cpu_model else ""
    return ["-cpu", f"qemu64,vendor={CPUID_VENDOR_IDS[grid.vendor or 'intel']}{model}"]


def _ioeventfd(boot: BootSpec) -> str:
    """Under the virtual clock a 9p device's queue is served when the guest writes its notify, in the vCPU's
    thread, not by the main loop at a host-timed instant: ``ioeventfd=off`` (lab.vm.tcg.guest_clock)."""
    return ",ioeventfd=off" if boot.clock.virtual and boot.accel != "kvm" else ""


def qemu_argv(
    topo: Topology, placement: Placement, boot: BootSpec, qemu: Sequence[str] = ("qemu-system-x86_64",)
) -> list[str]:
    """The whole command line. No network device (but for ``ssh_port``: the nested libvirt host's loopback
    forward); serial console to a file. ``qemu`` is its start: the binary and its -L data directories
    (lab.vm.qemu.emulator.Emulator.argv_prefix).

    q35 rather than pc: its PCIe root complex routes the 9p device's interrupt without the
    ACPI PCI link objects the pc machine's guest has to evaluate (AML, slow under TCG).
    Measured here: an idle ring-4 run took 0.14 s less (medians of 7, interleaved)."""
    argv = [
        *qemu,
        *machine_args(topo, placement, boot),
        "-kernel",
        boot.kernel,
        "-initrd",
        boot.initrd,
        "-append",
        boot.cmdline,
        "-chardev",
        f"file,id=console,path={opt_value(boot.console_log)}",
        "-serial",
        "chardev:console",
        *share_args(boot),
    ]
    if boot.plugin:
        argv += ["-plugin", boot.plugin]
    if boot.qmp_socket:
        # The guest kernel reports its panics to pvpanic, and QMP tells us (GUEST_PANICKED: lab.run.status).
        # QEMU does nothing more: the guest's own panic path (panic=-1 reboots, -no-reboot ends QEMU) runs.
        argv += ["-device", "pvpanic", "-action", "panic=none"]
        argv += ["-qmp", f"unix:{opt_value(boot.qmp_socket)},server=on,wait=off"]
    if boot.start_paused:
        argv.append("-S")
    return argv


def machine_args(topo: Topology, placement: Placement, boot: BootSpec) -> list[str]:
    """The machine: its name, chipset, accelerator and CPU model, no defaults, the firmware and the topology
    (memory, CPUs, NUMA nodes and distances). What another launcher of QEMU (LAVA's qemu device type:
    lab.matrix.lava) passes as it is, with its own kernel, console and monitor."""
    if boot.accel == "kvm":
        accel = ["-accel", "kvm", "-cpu", "host"]
    else:
        accel = boot.clock.accel_args() + cpu_model(topo, boot)
    return [
        "-name",
        boot.name,
        "-machine",
        machine_option(topo),
        *accel,
        "-nodefaults",
        "-no-user-config",
        "-no-reboot",
        "-display",
        "none",
        *(["-bios", boot.firmware] if boot.firmware else []),
        *topology_args(topo, placement),
    ]


def share_args(boot: BootSpec) -> list[str]:
    """The results share (virtio-9p, tag "results"), the nested tier's read-only host share and its network."""
    argv: list[str] = []
    if boot.results_dir:
        argv += [
            "-fsdev",
            # mapped-file: the guest's symlinks, device nodes, owners and mode bits stay metadata in
            # QEMU's .virtfs_metadata files; on the host every guest file is a plain 0600 file.
            f"local,id=results,path={opt_value(boot.results_dir)},security_model=mapped-file,multidevs=remap",
            "-device",
            "virtio-9p-pci,fsdev=results,mount_tag=results,bus=pcie.0,addr=0x2" + _ioeventfd(boot),
        ]
    if boot.host_share:
        argv += [
            "-fsdev",
            f"local,id=hostroot,path={opt_value(boot.host_share)},security_model=none,readonly=on,multidevs=remap",
            "-device",
            "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot,bus=pcie.0,addr=0x3" + _ioeventfd(boot),
        ]
    if boot.ssh_port:
        # restrict=on: the guest reaches neither the host nor anything beyond it; the one forward (which
        # restrict does not affect) is on the loopback address, so only this machine reaches the guest.
        argv += [
            "-netdev",
            f"user,id=net0,restrict=on,hostfwd=tcp:127.0.0.1:{boot.ssh_port}-:22",
            "-device",
            "virtio-net-pci,netdev=net0,bus=pcie.0,addr=0x4",
        ]
    return argv

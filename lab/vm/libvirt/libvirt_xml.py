"""The libvirt domain XML for a topology + placement + boot spec.

It describes the same VM as :func:`lab.vm.qemu.qemu_argv.qemu_argv`: the same
machine, vCPU topology, guest NUMA nodes and SLIT, memory binding, vCPU
pinning, kernel boot, serial console to a file and 9p results share, and
nothing else (no network, no graphics, no balloon, no USB). Pure function, no
I/O; the output is deterministic and checked against libvirt 9.0's RelaxNG
schema (``virt-xml-validate FILE domain``) by ``tests/unit/test_libvirt_xml.py``.

How the QEMU options map:

* ``-accel kvm -cpu host`` -> ``<domain type='kvm'>`` and ``<cpu mode='host-passthrough'>``;
  TCG -> ``<domain type='qemu'>`` and a ``<cpu>`` without ``mode`` (QEMU's
  default model, as the argv has no ``-cpu``).
* ``-smp`` -> ``<vcpu>`` plus ``<cpu><topology sockets dies cores threads>`` (dies='1' without a CPU grid).
  A grid's clusters (``-smp modules=``) have no place in libvirt 9.0's ``<topology>`` (10.1 added
  ``clusters``): refused. So is a memoryless node: libvirt 9.0 gives a ``<cell>`` of memory 0 a
  ``memory-backend-ram`` of size 0, which QEMU refuses ("property 'size' ... doesn't take value '0'").
* A grid's TCG ``-cpu qemu64,vendor=V`` -> ``<cpu mode='custom'><model vendor_id='V'>qemu64</model>``; its
  ``family=F,model=M`` (the spec's ``cpu_model``), which ``<model>`` cannot say, -> ``<qemu:commandline>`` with
  ``-global qemu64-x86_64-cpu.family=F -global qemu64-x86_64-cpu.model=M`` (the same CPU properties).
* ``-numa node``/``-numa dist`` -> ``<cpu><numa><cell>`` with the full SLIT row
  in ``<distances>`` of every cell. vCPUs are numbered node by node, so a
  cell's ``cpus`` is a contiguous range, and libvirt's cpu-index based
  ``-numa node,cpus=`` puts each vCPU on the same socket/core/thread as the
  argv's ``-numa cpu`` entries.
* A CPU-less node is a ``<cell>`` WITHOUT a ``cpus`` attribute (libvirt >= 6.6;
  the schema has ``cpus`` optional). ``cpus=''`` would not validate: the
  ``cpuset`` type needs at least one number.
* ``memory-backend-*,host-nodes=N,policy=bind`` -> ``<numatune>``: one
  ``<memnode mode='strict'>`` per cell, plus ``<memory mode='strict'>`` over
  the union of host nodes (libvirt applies that to the rest of QEMU's memory).
* Backing: ram -> no ``<memoryBacking>`` (unless preallocated); memfd ->
  ``<source type='memfd'/>``; hugepages -> ``<hugepages><page size unit='KiB'/>``
  (libvirt takes the hugetlbfs mount from qemu.conf, so
  ``Backing.hugepage_path`` has no place in the XML); prealloc, and hugepages
  always (as in the argv) -> ``<allocation mode='immediate'/>``.
* ``-machine q35`` -> ``<type machine='q35'>``. The 9p device sits on the root
  complex at the same address in both (``bus=pcie.0,addr=0x2`` -> ``<address
  type='pci' bus='0x00' slot='0x02'>``); left to itself libvirt would put it
  behind a ``pcie-root-port``.
* ``-no-reboot`` -> ``on_reboot`` destroy (and poweroff/crash destroy).
* ``-fsdev local,security_model=mapped-file,multidevs=remap`` ->
  ``<filesystem type='mount' accessmode='mapped' multidevs='remap'>`` with
  ``<driver type='path'/>``: libvirt turns ``mapped`` into QEMU's
  ``security_model=mapped`` (``mapped-xattr``), the one mapped model it offers.
  Either way the guest's symlinks, device nodes, owners and mode bits are only
  metadata on the host (lab.vm.share).
* ``-nodefaults`` -> ``<controller type='usb' model='none'/>`` and
  ``<memballoon model='none'/>``; no ``<interface>``, ``<graphics>``, ``<video>``.

A tiered machine's ``-machine q35,max-ram-below-4g=NM`` (its slow nodes above 4 GiB: lab.topology.model.tiers),
which libvirt 9.0 has no element for, -> ``<qemu:commandline>`` with ``-machine max-ram-below-4g=NM``: QEMU merges
the two ``-machine`` options.

``-plugin`` (``boot.plugin``, lab.vm.tcg.access_plugin) -> ``<qemu:commandline>`` with
``-plugin`` and its value (libvirt has no element for TCG plugins; it marks such a
domain as tainted by custom arguments).

One difference: ``boot.firmware`` (qboot, lab.vm.qemu.firmware) is not carried
over; a libvirt domain boots the host's default firmware (SeaBIOS).

``boot.qmp_socket`` and ``boot.start_paused`` have no counterpart: libvirt owns
the monitor and always starts QEMU paused until it has pinned the vCPUs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from lab.cpulist import format_cpulist
from lab.errors import LabError
from lab.placement.pinning import Placement
from lab.topology.model.cpu_grid import CPUID_VENDOR_IDS
from lab.topology.model.tiers import max_ram_below_4g
from lab.topology.model.topology import Topology
from lab.topology.predictions.cpu_view import smp_layout
from lab.vm.backend import BootSpec

QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
ET.register_namespace("qemu", QEMU_NS)

DOMAIN_TYPES = ("kvm", "qemu")
EMULATOR = "/usr/bin/qemu-system-x86_64"
RESULTS_TAG = "results"


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, attrs)
    if text is not None:
        el.text = text
    return el


def check_expressible(topo: Topology) -> None:
    """A one-line LabError for a machine libvirt 9.0 cannot boot as specified (clusters, memoryless nodes)."""
    if topo.cpu_grid is not None and topo.cpu_grid.has_clusters:
        raise LabError(
            f"topology {topo.name}: cores_per_cluster: libvirt 9.0's <topology> has no clusters (libvirt 10.1 "
            "added them); run it on direct QEMU (--backend qemu --qemu backports)"
        )
    if topo.memoryless_nodes:
        raise LabError(
            f"topology {topo.name}: node {topo.memoryless_nodes[0]} is memoryless, which libvirt 9.0 cannot start "
            "(it gives a <cell> of memory 0 a memory backend of size 0, which QEMU refuses); run it on direct "
            "QEMU (--backend qemu)"
        )


def _cpuid_globals(topo: Topology, domain_type: str) -> list[str]:
    """A grid's ``cpu_model`` under TCG: libvirt 9.0's ``<cpu><model>`` takes a vendor_id but no family or model, so
    they go to QEMU as ``-global qemu64-x86_64-cpu.family=F`` and ``.model=M``, the properties ``-cpu
    qemu64,family=F,model=M`` sets, beside the ``-cpu qemu64,vendor=...`` libvirt writes. Under KVM the guest is shown
    the host's CPU (host-passthrough), as with direct QEMU's ``-cpu host``."""
    grid = topo.cpu_grid
    if domain_type == "kvm" or grid is None or grid.cpu_model is None:
        return []
    family, model = grid.cpu_model
    return ["-global", f"qemu64-x86_64-cpu.family={family}", "-global", f"qemu64-x86_64-cpu.model={model}"]


def _check(topo: Topology, placement: Placement, boot: BootSpec, domain_type: str) -> None:
    if domain_type not in DOMAIN_TYPES:
        raise LabError(f"domain type: {domain_type!r} is not one of {', '.join(DOMAIN_TYPES)}")
    if not boot.name or "/" in boot.name or "\n" in boot.name:
        raise LabError(f"name: {boot.name!r} is not a valid libvirt domain name (non-empty, no '/' or newline)")
    for field in ("kernel", "initrd", "console_log", "results_dir"):
        path = getattr(boot, field)
        if not path.startswith("/"):
            raise LabError(f"{field}: libvirt needs an absolute path, got {path!r}")
    if boot.firmware:
        raise LabError(f"firmware: {boot.firmware}: libvirt domains boot the host's default firmware")
    if len(placement.memory_host_nodes) != topo.n_nodes:
        raise LabError(f"placement: {len(placement.memory_host_nodes)} memory bindings for {topo.n_nodes} guest nodes")
    check_expressible(topo)
    if len(placement.vcpu_pins) != topo.total_cpus:
        raise LabError(f"placement: {len(placement.vcpu_pins)} vCPU pins for {topo.total_cpus} vCPUs")


def _memory_backing(root: ET.Element, placement: Placement) -> None:
    b = placement.backing
    prealloc = b.prealloc or b.kind == "hugepages"
    if b.kind == "ram" and not prealloc:
        return
    mb = _sub(root, "memoryBacking")
    # libvirt's own order: hugepages, nosharepages, locked, source, access, allocation, discard.
    if b.kind == "hugepages":
        _sub(_sub(mb, "hugepages"), "page", size=str(b.hugepage_kib), unit="KiB")
    elif b.kind == "memfd":
        _sub(mb, "source", type="memfd")
    if prealloc:
        _sub(mb, "allocation", mode="immediate")


def _cpu(root: ET.Element, topo: Topology, domain_type: str) -> None:
    grid = topo.cpu_grid
    if domain_type == "kvm":
        cpu = _sub(root, "cpu", mode="host-passthrough")
    elif grid is not None:  # (the argv's -cpu qemu64,vendor=...: lab.vm.qemu.qemu_argv.cpu_model)
        cpu = _sub(root, "cpu", mode="custom", match="exact", check="none")
        _sub(cpu, "model", "qemu64", fallback="forbid", vendor_id=CPUID_VENDOR_IDS[grid.vendor or "intel"])
    else:
        cpu = _sub(root, "cpu")
    if grid is None:
        smp = smp_layout(topo)
        _sub(cpu, "topology", sockets=str(smp.sockets), dies="1", cores=str(smp.cores), threads=str(smp.threads))
    else:
        _sub(cpu, "topology", sockets=str(grid.packages), dies=str(grid.dies_per_package),
             cores=str(grid.cores_per_cluster), threads=str(grid.threads))  # fmt: skip
    numa = _sub(cpu, "numa")
    for node, vcpus in zip(topo.nodes, topo.node_cpus()):
        attrs = {"id": str(node.id)}
        if vcpus:  # a CPU-less node has no cpus attribute at all
            attrs["cpus"] = format_cpulist(vcpus)
        attrs |= {"memory": str(node.memory_mib * 1024), "unit": "KiB"}
        cell = _sub(numa, "cell", **attrs)
        distances = _sub(cell, "distances")
        for j, value in enumerate(topo.distances[node.id]):
            _sub(distances, "sibling", id=str(j), value=str(value))
    _interconnects(numa, topo)


def _interconnects(numa: ET.Element, topo: Topology) -> None:
    """HMAT (``-numa hmat-lb`` and ``hmat=on``) -> ``<interconnects>`` of access latency (ns) and
    bandwidth (MiB/s); libvirt turns them on HMAT and derives a CPU-less cell's initiator from them
    (the initiator with the best access latency, as lab.topology.model.tiers defaults it).

    libvirt takes a link as two-way: once 0->1 is given, 1->0 is refused ("Link already defined").
    So each pair of CPU nodes is given once, lower initiator first; the guest's view is the same,
    since the kernel reports a node's best initiator (its own, for a CPU node) and skips missing
    entries (value 0 in QEMU's table)."""
    tiers = topo.tiers
    if not tiers or not tiers.hmat:
        return
    inter = _sub(numa, "interconnects")
    pairs = []
    for row, init in enumerate(topo.cpu_nodes):
        for target in range(topo.n_nodes):
            if init != target and (target, init) in {(a, b) for _, a, b in pairs}:
                continue
            pairs.append((row, init, target))
    for row, init, target in pairs:
        _sub(inter, "latency", initiator=str(init), target=str(target), type="access",
             value=str(tiers.latency_ns[row][target]))  # fmt: skip
    for row, init, target in pairs:
        _sub(inter, "bandwidth", initiator=str(init), target=str(target), type="access",
             value=str(tiers.bandwidth_mib[row][target]), unit="MiB")  # fmt: skip


def _devices(root: ET.Element, boot: BootSpec) -> None:
    dev = _sub(root, "devices")
    _sub(dev, "emulator", EMULATOR)
    fs = _sub(dev, "filesystem", type="mount", accessmode="mapped", multidevs="remap")
    _sub(fs, "driver", type="path")
    _sub(fs, "source", dir=boot.results_dir)
    _sub(fs, "target", dir=RESULTS_TAG)
    # On the root complex, as in the argv: left to itself libvirt puts it behind a
    # pcie-root-port (one more bridge for the guest to probe) and adds a spare port.
    _sub(fs, "address", type="pci", domain="0x0000", bus="0x00", slot="0x02", function="0x0")
    _sub(dev, "controller", type="usb", index="0", model="none")
    serial = _sub(dev, "serial", type="file")
    _sub(serial, "source", path=boot.console_log)
    _sub(_sub(serial, "target", type="isa-serial", port="0"), "model", name="isa-serial")
    # The console is serial port 0 again, not a second device (libvirt adds it anyway).
    console = _sub(dev, "console", type="file")
    _sub(console, "source", path=boot.console_log)
    _sub(console, "target", type="serial", port="0")
    _sub(dev, "memballoon", model="none")
    # pvpanic (QEMU's -device pvpanic): the guest kernel reports its panic, and libvirt the domain as crashed
    # (on_crash preserve keeps it so for the backend to see: lab.vm.libvirt.libvirt_backend, lab.run.status).
    _sub(dev, "panic", model="isa")


def domain_xml(topo: Topology, placement: Placement, boot: BootSpec, domain_type: str = "qemu") -> str:
    """The libvirt domain XML (pretty-printed, newline-terminated) for the same VM as ``qemu_argv()``."""
    _check(topo, placement, boot, domain_type)
    root = ET.Element("domain", type=domain_type)
    _sub(root, "name", boot.name)
    _sub(root, "memory", str(topo.total_memory_mib * 1024), unit="KiB")
    _memory_backing(root, placement)
    _sub(root, "vcpu", str(topo.total_cpus), placement="static")

    cputune = _sub(root, "cputune")
    for vcpu in range(len(placement.vcpu_pins)):
        _sub(cputune, "vcpupin", vcpu=str(vcpu), cpuset=placement.cpuset(vcpu))

    numatune = _sub(root, "numatune")
    _sub(numatune, "memory", mode="strict", nodeset=format_cpulist(placement.memory_host_nodes))
    for cell, host_node in enumerate(placement.memory_host_nodes):
        _sub(numatune, "memnode", cellid=str(cell), mode="strict", nodeset=str(host_node))

    os_el = _sub(root, "os")
    _sub(os_el, "type", "hvm", arch="x86_64", machine="q35")
    _sub(os_el, "kernel", boot.kernel)
    _sub(os_el, "initrd", boot.initrd)
    _sub(os_el, "cmdline", boot.cmdline)

    features = _sub(root, "features")
    _sub(features, "acpi")  # without ACPI there is no SRAT/SLIT and the guest sees one node
    _sub(features, "apic")

    _cpu(root, topo, domain_type)
    _sub(root, "on_poweroff", "destroy")
    _sub(root, "on_reboot", "destroy")
    _sub(root, "on_crash", "preserve")
    _devices(root, boot)
    below = max_ram_below_4g(topo)  # (QEMU merges a second -machine into libvirt's)
    extra = (_cpuid_globals(topo, domain_type) + (["-machine", f"max-ram-below-4g={below}M"] if below else [])
             + (["-plugin", boot.plugin] if boot.plugin else []))  # fmt: skip
    if extra:
        args = ET.SubElement(root, f"{{{QEMU_NS}}}commandline")
        for value in extra:
            ET.SubElement(args, f"{{{QEMU_NS}}}arg", value=value)

    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"

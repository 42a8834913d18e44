"""lab.vm.libvirt.libvirt_xml: schema-valid libvirt domain XML describing the same VM as qemu_argv()."""

from __future__ import annotations

import shutil
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from common import BOOT, HOST, require_setup_package

from lab.cpulist import format_cpulist, parse_cpulist
from lab.errors import LabError
from lab.placement.pinning import Backing, Placement, plan_placement
from lab.topology.model.spec import load_spec, load_topology, preset_names
from lab.topology.model.topology import Topology
from lab.vm.libvirt.libvirt_xml import QEMU_NS, domain_xml
from lab.vm.qemu.qemu_argv import qemu_argv

VALIDATOR = "virt-xml-validate"

CPULESS = load_spec(
    {
        "name": "cpuless-smt",
        "nodes": [
            {"id": 0, "cpus": 4, "memory": "512M"},
            {"id": 1, "cpus": 4, "memory": "512M"},
            {"id": 2, "cpus": 0, "memory": "256M"},
        ],
        "threads": 2,
        "distances": [[10, 20, 30], [20, 10, 30], [30, 30, 10]],
    },
    "test",
)

ASYMMETRIC = load_spec(
    {
        "name": "asym",
        "nodes": 2,
        "cpus_per_node": 1,
        "memory_per_node": "256M",
        "distances": [[10, 21], [31, 10]],
    },
    "test",
)


def validate(xml: str, tmp_path: Path) -> None:
    """Run libvirt's own RelaxNG check; never pass when the tool is missing (common.require_setup_package)."""
    binary = shutil.which(VALIDATOR)
    require_setup_package(binary is not None, VALIDATOR, "libvirt-clients")
    assert binary is not None
    path = tmp_path / "domain.xml"
    path.write_text(xml)
    proc = subprocess.run([binary, str(path), "domain"], check=False, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"{VALIDATOR} rejected the XML:\n{proc.stdout}{proc.stderr}\n{xml}"


def check_same_vm(xml: str, topo: Topology, placement: Placement, domain_type: str) -> ET.Element:
    """Parse the XML back and compare it with the topology and placement."""
    root = ET.fromstring(xml)
    assert root.tag == "domain" and root.get("type") == domain_type
    assert root.findtext("name") == BOOT.name
    mem = root.find("memory")
    assert mem.get("unit") == "KiB" and int(mem.text) == topo.total_memory_mib * 1024
    vcpu = root.find("vcpu")
    assert vcpu.get("placement") == "static" and int(vcpu.text) == topo.total_cpus

    os_el = root.find("os")
    ostype = os_el.find("type")
    argv = qemu_argv(topo, placement, BOOT)
    machine = argv[argv.index("-machine") + 1]
    # hmat=on has no machine attribute in libvirt: <interconnects> turn it on (checked below); nor has
    # max-ram-below-4g: a second -machine in <qemu:commandline>, which QEMU merges
    machine, *props = machine.split(",")
    assert (ostype.text, ostype.get("arch"), ostype.get("machine")) == ("hvm", "x86_64", machine)
    assert (root.find("cpu/numa/interconnects") is not None) == ("hmat=on" in props)
    values = [a.get("value") for a in root.findall(f"{{{QEMU_NS}}}commandline/{{{QEMU_NS}}}arg")]
    below = [p for p in props if p.startswith("max-ram-below-4g=")]
    assert [values[i + 1] for i, v in enumerate(values) if v == "-machine"] == below
    assert os_el.findtext("kernel") == BOOT.kernel
    assert os_el.findtext("initrd") == BOOT.initrd
    assert os_el.findtext("cmdline") == BOOT.cmdline
    assert root.find("features/acpi") is not None, "without ACPI the guest sees one node"
    assert root.find("features/apic") is not None

    cpu = root.find("cpu")
    # The argv's -cpu (a CPU grid's vendor under TCG) is the <model>'s vendor_id; QEMU's default has no <model>.
    model = argv[argv.index("-cpu") + 1] if "-cpu" in argv and domain_type == "qemu" else None
    want_mode = "host-passthrough" if domain_type == "kvm" else ("custom" if model else None)
    assert cpu.get("mode") == want_mode
    if model:
        name, _, rest = model.partition(",vendor=")
        vendor, *cpuid = rest.split(",")
        assert (cpu.findtext("model"), cpu.find("model").get("vendor_id")) == (name, vendor)
        # the family and model <model> cannot say: the same CPU properties through <qemu:commandline>'s -global
        args = [a.get("value") for a in root.findall(f"{{{QEMU_NS}}}commandline/{{{QEMU_NS}}}arg")]
        assert [f"{name}-x86_64-cpu.{kv}" for kv in cpuid] == [a for a in args if a.startswith(f"{name}-x86_64")]
        assert args.count("-global") == len(cpuid)
    # The same -smp: sockets, dies, cores and threads (the argv's dies= only with a CPU grid).
    smp = dict(kv.split("=") for kv in argv[argv.index("-smp") + 1].split(",")[1:])
    top = cpu.find("topology")
    assert {k: int(v) for k, v in top.attrib.items()} == {
        "sockets": int(smp["sockets"]),
        "dies": int(smp.get("dies", 1)),
        "cores": int(smp["cores"]),
        "threads": int(smp["threads"]),
    }
    cells = cpu.findall("numa/cell")
    assert len(cells) == topo.n_nodes
    for node, vcpus, cell in zip(topo.nodes, topo.node_cpus(), cells):
        assert int(cell.get("id")) == node.id
        assert cell.get("cpus") == (format_cpulist(vcpus) if vcpus else None)
        assert cell.get("unit") == "KiB" and int(cell.get("memory")) == node.memory_mib * 1024
        siblings = cell.findall("distances/sibling")
        assert [int(s.get("id")) for s in siblings] == list(range(topo.n_nodes))
    matrix = tuple(tuple(int(s.get("value")) for s in cell.findall("distances/sibling")) for cell in cells)
    assert matrix == topo.distances

    pins = root.findall("cputune/vcpupin")
    assert len(pins) == topo.total_cpus
    assert [int(p.get("vcpu")) for p in pins] == list(range(topo.total_cpus))
    assert tuple(tuple(parse_cpulist(p.get("cpuset"))) for p in pins) == placement.vcpu_pins

    numatune = root.find("numatune")
    memory = numatune.find("memory")
    assert memory.get("mode") == "strict"
    assert memory.get("nodeset") == format_cpulist(placement.memory_host_nodes)
    memnodes = numatune.findall("memnode")
    assert [int(m.get("cellid")) for m in memnodes] == list(range(topo.n_nodes))
    assert all(m.get("mode") == "strict" for m in memnodes)
    assert tuple(int(m.get("nodeset")) for m in memnodes) == placement.memory_host_nodes

    # A crash (the guest kernel's panic through pvpanic) is kept for the backend to see as "crashed".
    assert [root.findtext(e) for e in ("on_poweroff", "on_reboot", "on_crash")] == ["destroy", "destroy", "preserve"]

    devices = root.find("devices")
    assert devices.findtext("emulator") == "/usr/bin/qemu-system-x86_64"
    assert [p.get("model") for p in devices.findall("panic")] == ["isa"]
    assert devices.find("interface") is None, "the VM must have no network"
    assert devices.find("graphics") is None and devices.find("video") is None
    assert devices.find("memballoon").get("model") == "none"
    assert devices.find("serial").get("type") == "file"
    assert devices.find("serial/source").get("path") == BOOT.console_log
    fs = devices.find("filesystem")
    assert fs.find("source").get("dir") == BOOT.results_dir
    assert fs.find("target").get("dir") == "results"
    # the same PCI address as the argv's virtio-9p-pci device
    device = next(a for a in argv if a.startswith("virtio-9p-pci,"))
    opts = dict(o.split("=", 1) for o in device.split(",")[1:])
    addr = fs.find("address")
    assert opts["bus"] == "pcie.0" and addr.get("bus") == "0x00"
    assert int(opts["addr"], 16) == int(addr.get("slot"), 16) and addr.get("function") == "0x0"
    assert "qmp" not in xml and BOOT.qmp_socket not in xml
    return root


@pytest.mark.parametrize("domain_type", ["qemu", "kvm"])
@pytest.mark.parametrize("preset", preset_names())
def test_presets_validate_and_match(preset: str, domain_type: str, tmp_path: Path) -> None:
    topo = load_topology(preset)
    placement = plan_placement(topo, HOST)
    if topo.memoryless_nodes or (topo.cpu_grid is not None and topo.cpu_grid.has_clusters):
        # (libvirt 9.0 has no clusters, and cannot start a memoryless cell: refused)
        with pytest.raises(LabError, match="has no clusters|is memoryless"):
            domain_xml(topo, placement, BOOT, domain_type)
        return
    xml = domain_xml(topo, placement, BOOT, domain_type)
    validate(xml, tmp_path)
    root = check_same_vm(xml, topo, placement, domain_type)
    # The synthetic host has two nodes, so the guest's memory is spread over both.
    assert {m.get("nodeset") for m in root.findall("numatune/memnode")} == {"0", "1"}
    assert root.find("memoryBacking") is None  # plain RAM, not preallocated


def test_presets_exist() -> None:
    assert preset_names(), "no topology presets found"


@pytest.mark.parametrize(
    "backing, source, hugepage_kib",
    [
        (Backing("memfd", prealloc=True), "memfd", None),
        (Backing("hugepages"), None, 2048),
        (Backing("hugepages", prealloc=True, hugepage_kib=2048), None, 2048),
        (Backing("ram", prealloc=True), None, None),
    ],
)
def test_backings_validate(backing: Backing, source: str | None, hugepage_kib: int | None, tmp_path: Path) -> None:
    topo = load_topology("ring-4")
    placement = plan_placement(topo, HOST, backing)
    xml = domain_xml(topo, placement, BOOT, "kvm")
    validate(xml, tmp_path)
    root = check_same_vm(xml, topo, placement, "kvm")
    mb = root.find("memoryBacking")
    assert mb is not None
    assert (mb.find("source").get("type") if mb.find("source") is not None else None) == source
    pages = mb.findall("hugepages/page")
    if hugepage_kib is None:
        assert mb.find("hugepages") is None
    else:
        assert [(int(p.get("size")), p.get("unit")) for p in pages] == [(hugepage_kib, "KiB")]
    # Hugepages are always preallocated, as in the QEMU argv.
    assert mb.find("allocation").get("mode") == "immediate"


def test_memfd_without_prealloc(tmp_path: Path) -> None:
    topo = load_topology("mesh-2")
    placement = plan_placement(topo, HOST, Backing("memfd"))
    xml = domain_xml(topo, placement, BOOT)
    validate(xml, tmp_path)
    mb = ET.fromstring(xml).find("memoryBacking")
    assert mb.find("source").get("type") == "memfd"
    assert mb.find("allocation") is None


def test_cpuless_node_and_smt(tmp_path: Path) -> None:
    placement = plan_placement(CPULESS, HOST)
    for domain_type in ("qemu", "kvm"):
        xml = domain_xml(CPULESS, placement, BOOT, domain_type)
        validate(xml, tmp_path)
        root = check_same_vm(xml, CPULESS, placement, domain_type)
        cells = root.findall("cpu/numa/cell")
        # A CPU-less cell has no cpus attribute at all (cpus='' is not a valid cpuset).
        assert [c.get("cpus") for c in cells] == ["0-3", "4-7", None]
        assert root.find("cpu/topology").attrib == {"sockets": "2", "dies": "1", "cores": "2", "threads": "2"}


def test_asymmetric_distances_kept_in_full(tmp_path: Path) -> None:
    placement = plan_placement(ASYMMETRIC, HOST)
    xml = domain_xml(ASYMMETRIC, placement, BOOT)
    validate(xml, tmp_path)
    check_same_vm(xml, ASYMMETRIC, placement, "qemu")


def test_fixed_placement_single_host_node(tmp_path: Path) -> None:
    topo = load_topology("mesh-4")
    placement = Placement((0, 0, 0, 0), tuple((c,) for c in (3, 2, 1, 0, 3, 2, 1, 0)), Backing(), host_nodes=1)
    xml = domain_xml(topo, placement, BOOT)
    validate(xml, tmp_path)
    root = check_same_vm(xml, topo, placement, "qemu")
    assert root.find("numatune/memory").get("nodeset") == "0"


def test_node_pinning_gives_cpusets(tmp_path: Path) -> None:
    topo = load_topology("ring-4")
    placement = plan_placement(topo, HOST, pinning="node")
    xml = domain_xml(topo, placement, BOOT)
    validate(xml, tmp_path)
    root = check_same_vm(xml, topo, placement, "qemu")
    assert [p.get("cpuset") for p in root.findall("cputune/vcpupin")][:4] == ["0-3", "0-3", "4-7", "4-7"]


def test_deterministic_and_pretty() -> None:
    topo = load_topology("ring-8")
    placement = plan_placement(topo, HOST, Backing("memfd", prealloc=True))
    a = domain_xml(topo, placement, BOOT, "kvm")
    b = domain_xml(topo, placement, BOOT, "kvm")
    assert a == b
    assert a.startswith('<domain type="kvm">\n  <name>') and a.endswith("</domain>\n")


def test_qemu_only_options_are_ignored() -> None:
    topo = load_topology("ring-2")
    placement = plan_placement(topo, HOST)
    other = replace(BOOT, qmp_socket=None, start_paused=False)
    assert domain_xml(topo, placement, BOOT) == domain_xml(topo, placement, other)


@pytest.mark.parametrize("bad", ["tcg", "KVM", "xen", ""])
def test_bad_domain_type(bad: str) -> None:
    topo = load_topology("ring-2")
    with pytest.raises(LabError) as err:
        domain_xml(topo, plan_placement(topo, HOST), BOOT, bad)
    msg = str(err.value)
    assert "\n" not in msg and "domain type" in msg and "kvm" in msg and "qemu" in msg


def test_relative_path_is_an_error() -> None:
    topo = load_topology("ring-2")
    boot = replace(BOOT, results_dir="results")
    with pytest.raises(LabError, match="results_dir: libvirt needs an absolute path"):
        domain_xml(topo, plan_placement(topo, HOST), boot)


def test_placement_must_match_topology() -> None:
    topo = load_topology("ring-2")
    bad = Placement((0,), ((0,), (1,), (2,), (3,)), Backing(), host_nodes=2)
    with pytest.raises(LabError, match="memory bindings"):
        domain_xml(topo, bad, BOOT)

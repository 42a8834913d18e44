"""Memory tiers without VMs: spec sections, validation, the 6.1 prediction, the emitters, the readback check."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest
from common import assert_one_line_error, numalab

from lab.analysis.readback import check_topology
from lab.errors import LabError
from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_spec, load_topology
from lab.topology.model.tiers import (
    DAX_TIER,
    DRAM_TIER,
    check_tiers,
    dax_adistance,
    guest_phys_ranges,
    kernel_args,
    max_ram_below_4g,
    predict_tiers,
    ram_below_4g,
    read_tiers,
)
from lab.topology.predictions.kernel_view import predict
from lab.vm.backend import BootSpec
from lab.vm.libvirt.libvirt_xml import domain_xml
from lab.vm.qemu.qemu_argv import qemu_argv
from lab.workloads.registry import get_workload

BOOT = BootSpec(
    kernel="/k/bzImage", initrd="/k/initrd", cmdline="console=ttyS0", results_dir="/r", console_log="/c.log"
)


def _spec(**extra) -> dict:
    base = {
        "name": "t",
        "nodes": [
            {"id": 0, "cpus": 2, "memory": "512M"},
            {"id": 1, "cpus": 2, "memory": "512M"},
            {"id": 2, "cpus": 0, "memory": "256M"},
        ],
        "distances": [[10, 20, 15], [20, 10, 25], [15, 25, 10]],
    }
    return base | extra


def test_the_6_1_constants():
    # memory-tiers.c: MEMTIER_ADISTANCE_DRAM = 4*128 + 64 = 576 -> memory_tier4; kmem.c: 5x that -> memory_tier22
    assert (DRAM_TIER, DAX_TIER) == (4, 22)


def test_cpuless_nodes_without_tiers_are_dram_and_get_their_nearest_initiator():
    topo = load_spec(
        _spec(hmat={"latency_ns": [[10, 20, 30], [20, 10, 40]], "bandwidth_mib": [[9, 8, 7], [8, 9, 6]]}), "x"
    )
    assert topo.tiers.initiator_of(2) == 0  # distance 15 < 25
    view = predict_tiers(topo)
    assert view["tiers"] == {"memory_tier4": "0-2"}  # 6.1 does not tier by HMAT: just more DRAM
    assert view["demotion_targets"] == {"0": [], "1": [], "2": []}
    assert view["promotion_sources"] == []
    assert view["hmat_access0"]["2"] == {
        "read_latency": 30,
        "write_latency": 30,
        "read_bandwidth": 7,
        "write_bandwidth": 7,
        "initiators": [0],
    }


def test_tiered_2s_cxl_prediction():
    topo = load_topology("tiered-2s-cxl")
    view = predict(topo)["memory_tiers"]
    assert view["tiers"] == {"memory_tier4": "0-1", "memory_tier22": "2-3"}
    assert view["top_tier"] == "memory_tier4"
    assert view["demotion_targets"] == {"0": [2], "1": [3], "2": [], "3": []}
    assert view["promotion_sources"] == [2, 3]
    assert view["hmat_access0"]["3"]["read_latency"] == 250 and view["hmat_access0"]["3"]["initiators"] == [1]
    # the CPU-less nodes take no part in the sched-domain levels
    assert predict(topo)["distinct_distances"] == [10, 21]


def test_demotion_targets_ties_take_every_nearest_node():
    spec = _spec(
        nodes=[
            {"id": 0, "cpus": 2, "memory": "512M"},
            {"id": 1, "cpus": 0, "memory": "256M"},
            {"id": 2, "cpus": 0, "memory": "256M"},
        ],
        distances=[[10, 30, 30], [30, 10, 40], [30, 40, 10]],
        tiers={"slow_nodes": [1, 2]},
    )
    assert predict_tiers(load_spec(spec, "x"))["demotion_targets"]["0"] == [1, 2]


def test_physical_layout_and_kernel_args():
    topo = load_topology("tiered-2s-cxl")
    # RAM below 4 GiB ends where the first slow node starts: the slow nodes lie above 4 GiB, clear of the
    # firmware's tables at the top of low RAM (6.12 and later reserve a slow node's whole SRAT range for kmem)
    assert max_ram_below_4g(topo) == ram_below_4g(topo) == 1024
    assert guest_phys_ranges(topo) == [[(0, 512)], [(512, 512)], [(4096, 256)], [(4352, 256)]]
    assert kernel_args(topo) == [
        "memmap=256M%4096M-1+0xefffffff",
        "memmap=256M%4352M-1+0xefffffff",
        "swiotlb=noforce",
        "memhp_default_state=online",
    ]
    assert kernel_args(load_topology("ring-4")) == [] and max_ram_below_4g(load_topology("ring-4")) is None
    argv = qemu_argv(topo, plan_placement(topo, _host()), BOOT)
    assert argv[argv.index("-machine") + 1] == "q35,hmat=on,max-ram-below-4g=1024M"


def test_a_dax_nodes_tier_comes_from_the_hmat_from_6_7():
    topo = load_topology("tiered-2s-cxl")  # slow nodes: 250 ns and 8192 MiB/s at best, DRAM 100 ns, 20480 MiB/s
    assert predict_tiers(topo, "6.1.192-numalab")["tiers"] == {"memory_tier4": "0-1", "memory_tier22": "2-3"}
    # 576 * 500 / 200 = 1440, * 40960 / 16384 = 3600: memory_tier28 (as 6.12.117 and 7.3.4 read it back)
    assert dax_adistance(topo, 2, "6.12.117-numalab") == 3600
    assert predict_tiers(topo, "7.3.4-numalab")["tiers"] == {"memory_tier4": "0-1", "memory_tier28": "2-3"}
    assert predict_tiers(topo, None) == predict_tiers(topo, "6.1.0-28-amd64")  # (unknown: 6.1's, as numalab's docs)
    # two DRAM nodes more than 10% apart: the kernel takes no HMAT figure, and the default stands
    lat = [list(r) for r in topo.tiers.latency_ns]
    lat[1][1] = 120
    skewed = replace(topo, tiers=replace(topo.tiers, latency_ns=tuple(tuple(r) for r in lat)))
    assert dax_adistance(skewed, 2, "6.12.117") == 2880
    assert dax_adistance(load_topology("tiered-1s-far"), 1, "7.3.4") >> 7 == 54


def test_memory_beyond_2_75g_is_split_at_2g_and_continues_at_4g():
    topo = load_topology("tiered-2s-cxl").with_overrides(mem_per_node_mib=1024)
    assert guest_phys_ranges(topo) == [[(0, 1024)], [(1024, 1024)], [(4096, 1024)], [(5120, 1024)]]
    assert kernel_args(topo)[:2] == ["memmap=1024M%4096M-1+0xefffffff", "memmap=1024M%5120M-1+0xefffffff"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"tiers": {"slow_nodes": [1]}}, "tiers.slow_nodes: node 1 has CPUs"),
        ({"tiers": {"slow_nodes": [5]}}, "tiers.slow_nodes: node 5 does not exist"),
        ({"tiers": {"slow_nodes": [2], "bogus": 1}}, "tiers.bogus: unknown field"),
        ({"tiers": {"initiators": {2: 2}}}, "tiers.initiators.2: initiator 2 is not a node with CPUs"),
        ({"tiers": {"initiators": {0: 1}}}, "tiers.initiators: node 0 is not a CPU-less node"),
        ({"tiers": {"initiators": {"x": 1}}}, "tiers.initiators.x: expected a node id, got 'x'"),
        ({"hmat": {"latency_ns": [[10, 20, 30]], "bandwidth_mib": [[1, 2, 3]]}}, "hmat.latency_ns: expected 2 rows"),
        ({"hmat": {"latency_ns": [[10, 20, 30], [1, 2, 3]]}}, "hmat: give both latency_ns and bandwidth_mib"),
        ({"hmat": {"latency_ns": [[10, 0, 30], [1, 2, 3]]}}, "hmat.latency_ns[0][1]: must be from 1 to 1048576, got 0"),
        ({"hmat": {"speed": 1}}, "hmat.speed: unknown field"),
    ],
)
def test_bad_tier_specs_name_the_field(extra: dict, needle: str):
    with pytest.raises(LabError) as err:
        load_spec(_spec(**extra), "spec.yaml")
    assert needle in str(err.value) and str(err.value).startswith("spec.yaml: ")


def test_slow_nodes_need_whole_memory_blocks():
    bad = _spec(nodes=[{"id": 0, "cpus": 2, "memory": "512M"}, {"id": 1, "cpus": 2, "memory": "512M"},
                       {"id": 2, "cpus": 0, "memory": "200M"}], tiers={"slow_nodes": [2]})  # fmt: skip
    with pytest.raises(LabError, match="not in whole 128 MiB memory blocks"):
        load_spec(bad, "x")
    # one block is enough: above 4 GiB no block is kept out for the firmware
    small = load_spec(_spec(tiers={"slow_nodes": [2]}) | {"nodes": _spec()["nodes"][:2] + [
        {"id": 2, "cpus": 0, "memory": "128M"}]}, "x")  # fmt: skip
    assert guest_phys_ranges(small)[2] == [(4096, 128)]


def test_manifest_round_trip_keeps_the_tiers():
    from lab.topology.model.topology import topology_from_dict

    topo = load_topology("tiered-2s-cxl")
    assert topology_from_dict(topo.to_dict()).tiers == topo.tiers


def test_qemu_argv_has_hmat_initiators_and_every_pair():
    topo = load_topology("tiered-2s-cxl")
    argv = qemu_argv(topo, plan_placement(topo, _host()), BOOT)
    assert argv[argv.index("-machine") + 1] == "q35,hmat=on,max-ram-below-4g=1024M"
    numa = [argv[i + 1] for i, a in enumerate(argv) if a == "-numa"]
    assert "node,nodeid=2,memdev=mem2,initiator=0" in numa
    assert "node,nodeid=3,memdev=mem3,initiator=1" in numa
    lb = [x for x in numa if x.startswith("hmat-lb")]
    assert len(lb) == 2 * 4 * 2  # 2 initiators x 4 targets x (latency, bandwidth)
    assert "hmat-lb,initiator=1,target=3,hierarchy=memory,data-type=access-latency,latency=250" in lb
    assert "hmat-lb,initiator=0,target=3,hierarchy=memory,data-type=access-bandwidth,bandwidth=4096M" in lb
    plain = qemu_argv(load_topology("ring-2"), plan_placement(load_topology("ring-2"), _host()), BOOT)
    assert plain[plain.index("-machine") + 1] == "q35" and not any("hmat" in a for a in plain)


def _host():
    from common import HOST

    return HOST


def test_libvirt_xml_interconnects_validate_and_skip_reverse_links(tmp_path: Path):
    topo = load_topology("tiered-2s-cxl")
    xml = domain_xml(topo, plan_placement(topo, _host()), BOOT)
    path = tmp_path / "d.xml"
    path.write_text(xml)
    proc = subprocess.run(["virt-xml-validate", str(path), "domain"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    links = [(el.tag, el.get("initiator"), el.get("target"), el.get("value"), el.get("unit"))
             for el in ET.fromstring(xml).find("cpu/numa/interconnects")]  # fmt: skip
    assert ("latency", "1", "0", "200", None) not in links  # 0->1 is given; libvirt refuses the reverse
    assert ("latency", "0", "1", "200", None) in links
    assert ("latency", "1", "1", "100", None) in links
    assert ("bandwidth", "1", "3", "8192", "MiB") in links
    pairs = {(i, t) for _, i, t, _, _ in links}
    assert not any(i != t and (t, i) in pairs for i, t in pairs)


def test_tiers_readback_is_checked():
    topo = load_topology("tiered-1s-far")
    good = "\n".join(
        [
            "/sys/devices/virtual/memory_tiering/memory_tier4/nodelist:0",
            "/sys/devices/virtual/memory_tiering/memory_tier22/nodelist:1",
            "/sys/kernel/mm/numa/demotion_enabled:true",
            *(f"/sys/devices/system/node/node0/access0/initiators/{k}:{v}" for k, v in
              (("read_latency", 100), ("write_latency", 100), ("read_bandwidth", 20480), ("write_bandwidth", 20480))),
            *(f"/sys/devices/system/node/node1/access0/initiators/{k}:{v}" for k, v in
              (("read_latency", 300), ("write_latency", 300), ("read_bandwidth", 5120), ("write_bandwidth", 5120))),
        ]
    )  # fmt: skip
    read = read_tiers(good)
    assert read["demotion_enabled"] is True
    assert check_tiers(predict_tiers(topo), read) == []
    flat = read_tiers(good.replace("memory_tier22/nodelist:1", "memory_tier4/nodelist:0-1"))
    assert check_tiers(predict_tiers(topo), flat)[0].startswith("memory tiers: predicted")
    slow = read_tiers(good.replace("node1/access0/initiators/read_latency:300", "x:1"))
    assert check_tiers(predict_tiers(topo), slow) == ["node 1 access0 read_latency: predicted 300, the guest has None"]
    readback = {"nodes": {0: {"cpus": [0, 1], "distances": [10, 20], "memtotal_mib": 200},
                          1: {"cpus": [], "distances": [20, 10], "memtotal_mib": 512}}}  # fmt: skip
    assert check_topology(topo, readback, {}) == ["the guest wrote no memory-tier readback (tiers.txt)"]
    assert check_topology(topo, readback | {"memory_tiers": read}, {}) == []
    # a kernel without dax kmem never onlines the slow node
    problems = check_topology(topo, {"nodes": {0: readback["nodes"][0]}, "memory_tiers": read}, {})
    assert len(problems) == 1  # (the run's reason is its first problem)
    assert problems[0].startswith("guest nodes [0] != spec nodes 0..1: slow memory nodes [1] never came online")
    assert "kernel-configs/tiering.config" in problems[0]


def test_the_tiering_workload_overflows_the_fast_tier():
    topo = load_topology("tiered-1s-far")
    cmd = get_workload("tiering").command(topo, 10)
    assert cmd == "numa02 --duration 10 --threads 2 --mem-mib-per-thread 160"  # 320 MiB > the 256 MiB fast tier


def test_cli_bad_tier_spec_is_one_line(tmp_path: Path):
    spec = tmp_path / "bad.yaml"
    spec.write_text(
        "name: bad\nnodes: [{id: 0, cpus: 2, memory: 512M}, {id: 1, cpus: 2, memory: 512M}]\n"
        "distances: [[10, 20], [20, 10]]\ntiers: {slow_nodes: [1]}\n"
    )
    assert_one_line_error(numalab("topo", "check", str(spec)), "bad.yaml", "tiers.slow_nodes: node 1 has CPUs")
    ok = numalab("topo", "show", "tiered-2s-cxl", "--json")
    assert ok.returncode == 0
    assert '"memory_tier22": "2-3"' in ok.stdout
    text = numalab("topo", "show", "tiered-2s-cxl").stdout
    assert "memory_tier22: nodes 2-3" in text and "node 1 demotes to 3" in text


def test_import_with_slow_cpuless_nodes(tmp_path: Path):
    from common import REPO

    out = tmp_path / "cxl.yaml"
    data = REPO / "tests" / "data" / "numactl"
    proc = numalab("topo", "import", str(data / "cxl-2socket.txt"), "--slow-cpuless", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    topo = load_topology(str(out))
    assert topo.tiers.slow_nodes == (2, 3)
    assert topo.tiers.initiators == ((2, 0), (3, 1))  # the nearest CPU node (14 < 24)
    assert predict_tiers(topo)["tiers"] == {"memory_tier4": "0-1", "memory_tier22": "2-3"}
    assert_one_line_error(
        numalab("topo", "import", str(data / "seed000.txt"), "--slow-cpuless"), "--slow-cpuless", "no CPU-less"
    )


def test_a_matrix_can_ask_for_tiering(tmp_path: Path):
    spec = tmp_path / "tiering.yaml"
    spec.write_text(
        "name: tiering\ntopologies: [tiered-1s-far]\nkernels: [stock]\nworkloads: [{name: tiering, duration: 10}]\n"
        "settings: [{name: mode0, numa_balancing: off}, {name: mode2, numa_balancing: tiering}]\nrepeats: 1\n"
    )
    proc = numalab("matrix", "list", str(spec), "--json")
    assert proc.returncode == 0, proc.stderr
    assert "tiering" in proc.stdout and "mode2" in proc.stdout
    spec.write_text(spec.read_text().replace("numa_balancing: tiering", "numa_balancing: promote"))
    assert_one_line_error(numalab("matrix", "check", str(spec)), "settings[1].numa_balancing", "tiering")


def test_tiered_topologies_add_the_dax_modules_in_dependency_order(tmp_path: Path):
    from lab.guest.image import NEEDED_MODULES, _module_order, tier_modules

    assert tier_modules(load_topology("ring-2")) == ()
    extra = tier_modules(load_topology("tiered-1s-far"))
    assert extra == ("dax_hmem", "kmem")
    mods = tmp_path / "modules"
    mods.mkdir()
    (mods / "modules.dep").write_text(
        "kernel/drivers/virtio/virtio_pci.ko:\nkernel/net/9p/9pnet_virtio.ko: kernel/net/9p/9pnet.ko\n"
        "kernel/net/9p/9pnet.ko:\nkernel/fs/9p/9p.ko: kernel/net/9p/9pnet.ko\n"
        "kernel/drivers/dax/hmem/dax_hmem.ko:\nkernel/drivers/dax/kmem.ko:\nkernel/drivers/dax/device_dax.ko:\n"
        "kernel/drivers/misc/pvpanic/pvpanic-mmio.ko: kernel/drivers/misc/pvpanic/pvpanic.ko\n"
        "kernel/drivers/misc/pvpanic/pvpanic.ko:\n"
    )
    plain = _module_order(mods)
    assert not any("dax" in m for m in plain) and len(plain) == len(NEEDED_MODULES) + 2  # 9pnet, pvpanic
    tiered = _module_order(mods, extra)
    assert tiered[len(plain) :] == ["kernel/drivers/dax/hmem/dax_hmem.ko", "kernel/drivers/dax/kmem.ko"]
    # device_dax is left out: it would take the dax device kmem has to get


def test_tiering_metrics_only_for_tiered_topologies():
    from lab.analysis.metrics import TIERING_METRIC_KEYS, metric_values

    vmstat = {"pgpromote_success": 5, "pgpromote_candidate": 9, "pgdemote_kswapd": 3, "pgdemote_direct": 0}
    numa = {"migrate_pages": {"numa_misplaced": {"succeeded": 5}, "compaction": {"succeeded": 2}}}
    tiered = {"topology": load_topology("tiered-1s-far").to_dict(), "metrics": {"vmstat": vmstat, "numa": numa}}
    values = metric_values(tiered)
    assert {k: values[k] for k in sorted(TIERING_METRIC_KEYS)} == {
        "migrate.demotion": 0,  # traced, and none were demoted
        "migrate.numa_misplaced": 5,
        "vmstat.pgdemote_direct": 0,
        "vmstat.pgdemote_kswapd": 3,
        "vmstat.pgpromote_candidate": 9,
        "vmstat.pgpromote_success": 5,
    }
    plain = tiered | {"topology": load_topology("ring-2").to_dict()}
    assert not TIERING_METRIC_KEYS & set(metric_values(plain))

"""The levels below and above a node (issue #48): the CPU grid from a spec, its QEMU argv, the kernel's view of
its CPUs predicted, and that prediction against what real guests wrote (tests/data/cpu_views: 6.1 guests of
the new presets under TCG, booted by numalab run)."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from common import BOOT, HOST, assert_one_line_error, numalab

from lab.analysis.cpu_readback import check_cpus, read_cpus
from lab.analysis.readback import check_topology, read_sched_domains, read_topology
from lab.analysis.sched_cache import kernel_says
from lab.errors import LabError
from lab.placement.pinning import plan_placement
from lab.topology.model.spec import load_spec, load_topology
from lab.topology.model.topology import topology_from_dict
from lab.topology.predictions.cache_aware import predict_sched_cache
from lab.topology.predictions.cpu_view import configured_levels, pkg_level_name, predict_cpus
from lab.topology.predictions.kernel_warnings import predicted_warnings
from lab.topology.predictions.snc_fix import FIXING_UP, sched_topology
from lab.vm.machine_needs import check_qemu_can_express
from lab.vm.qemu.qemu_argv import check_firmware_can_boot, qemu_argv

VIEWS = Path(__file__).resolve().parents[1] / "data" / "cpu_views"


def spec(**extra) -> dict:
    return {"nodes": 2, "cpus_per_node": 4, "memory_per_node": "256M", "distances": [[10, 20], [20, 10]]} | extra


def domains_of(topo, cpu: int, release: str = "6.1.0-18-amd64") -> list[tuple[str, str]]:
    return [(d["name"], d["cpus"]) for d in predict_cpus(topo, release)["cpus"][cpu]["domains"]]


def test_two_llcs_a_node_give_mc_under_the_node_level() -> None:
    topo = load_spec(spec(llcs_per_node=2), "t")
    g = topo.cpu_grid
    assert (g.packages, g.dies_per_package, g.clusters_per_die, g.cores_per_cluster) == (2, 2, 1, 2)
    assert domains_of(topo, 0) == [("MC", "0-1"), ("DIE", "0-3")]
    assert domains_of(topo, 6, "6.12.57+deb13-amd64") == [("MC", "6-7"), ("PKG", "4-7")]
    cpu5 = predict_cpus(topo)["cpus"][5]
    assert (cpu5["package"], cpu5["die"], cpu5["l3_cpus"], cpu5["l2_cpus"]) == (1, 0, "4-5", "5")


def test_a_package_of_two_nodes_has_no_package_level() -> None:
    topo = load_spec(spec(packages=1), "t")
    view = predict_cpus(topo)
    assert view["numa_in_package"] and view["packages"] == 1
    assert domains_of(topo, 0) == [("MC", "0-3")]  # (NODE degenerates into MC; NUMA is kernel_view's)


def test_smt_and_clusters() -> None:
    topo = load_spec(spec(cpus_per_node=8, threads=2, cores_per_cluster=2), "t")
    assert topo.cpu_grid.has_clusters and topo.cpu_grid.clusters_per_die == 2
    assert domains_of(topo, 0) == [("SMT", "0-1"), ("CLS", "0-3"), ("MC", "0-7")]
    cpu5 = predict_cpus(topo)["cpus"][5]
    assert (cpu5["cluster"], cpu5["core"], cpu5["thread"], cpu5["core_cpus"], cpu5["l2_cpus"]) == (
        1,
        0,
        1,
        "4-5",
        "4-7",
    )


def test_a_topology_without_a_grid_keeps_its_argv_and_has_no_grid() -> None:
    topo = load_topology("ring-4")
    assert topo.cpu_grid is None
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert "-cpu" not in argv and argv[argv.index("-smp") + 1] == "8,sockets=4,cores=2,threads=1"
    assert domains_of(topo, 2) == [("MC", "2-3")]


def test_grid_argv_places_each_vcpu_on_its_die_and_shows_the_vendor() -> None:
    topo = load_spec(spec(packages=1, llcs_per_node=2, cpu_vendor="amd"), "t")
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert argv[argv.index("-smp") + 1] == "8,sockets=1,dies=4,cores=2,threads=1"
    assert argv[argv.index("-cpu") + 1] == "qemu64,vendor=AuthenticAMD"
    cpus = [a for a in argv if a.startswith("cpu,node-id=")]
    assert cpus[5] == "cpu,node-id=1,socket-id=0,die-id=2,core-id=1,thread-id=0"


def test_one_die_a_package_names_no_die_id() -> None:
    """QEMU 7.2 refused ``die-id=0`` with ``dies=1`` ("die-id is not supported"): a package of one node and one
    LLC (packages: 2, llcs_per_node: 1) did not boot."""
    topo = load_spec(spec(packages=2, llcs_per_node=1), "t")
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert argv[argv.index("-smp") + 1] == "8,sockets=2,dies=1,cores=4,threads=1"
    cpus = [a for a in argv if a.startswith("cpu,node-id=")]
    assert cpus[5] == "cpu,node-id=1,socket-id=1,core-id=1,thread-id=0"


def test_clusters_need_qemu_9_2_and_say_which() -> None:
    topo = load_spec(spec(cores_per_cluster=1), "t")
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert argv[argv.index("-smp") + 1] == "8,sockets=2,dies=1,modules=4,cores=1,threads=1"
    assert "smp-cache.0.cache=l2,smp-cache.0.topology=module" in argv[argv.index("-machine") + 1]
    assert "module-id=3" in [a for a in argv if a.startswith("cpu,")][3]
    assert not any("die-id" in a for a in argv)  # (one die a package: QEMU's slots have no die id)
    with pytest.raises(LabError, match=r"needs QEMU 9\.2 or later; direct's QEMU is 7\.2\.19 .*--qemu backports"):
        check_qemu_can_express(topo, (7, 2, 19), "direct's QEMU")
    check_qemu_can_express(topo, (10, 0, 2))
    check_qemu_can_express(load_spec(spec(llcs_per_node=2), "t"), (7, 2, 19))


def test_memoryless_node_has_no_backend() -> None:
    topo = load_topology("memoryless-3")
    assert topo.memoryless_nodes == [1]
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert "node,nodeid=1" in argv and not any("id=mem1" in a for a in argv)


@pytest.mark.parametrize(
    "extra,needle",
    [
        ({"packages": 3}, "packages: 2 CPU nodes do not split evenly into 3 packages"),
        ({"llcs_per_node": 3}, "llcs_per_node: 4 CPUs a node do not split into 3 LLCs"),
        ({"llcs_per_node": 2, "cores_per_cluster": 3}, "cores_per_cluster: 2 cores an LLC do not split into"),
        ({"cpu_vendor": "via"}, "cpu_vendor"),
        ({"cpu_model": {"family": 6, "model": 173}}, "cpu_model: family 6 model 173 is a vendor's number; say whose"),
        ({"cpu_vendor": "intel", "cpu_model": {"family": 6, "model": 256}}, "cpu_model.model: must be from 0 to 255"),
        ({"cpu_vendor": "intel", "cpu_model": {"family": 271, "model": 1}}, "cpu_model.family: must be from 1 to 270"),
        ({"cpu_vendor": "intel", "cpu_model": {"family": 6}}, "cpu_model.model: missing"),
        ({"cpu_vendor": "intel", "cpu_model": 173}, "cpu_model: expected {family: F, model: M}, got 173"),
        ({"cpu_vendor": "intel", "cpu_model": {"family": 5, "model": 17}}, "cpu_model.model: 17 needs family 6 or"),
        (
            {"nodes": [{"id": 0, "cpus": 4, "memory": "256M"}, {"id": 1, "cpus": 2, "memory": "256M"}], "packages": 2},
            "nodes: node 1's LLCs would be 2 CPUs (2 in 1) and node 0's 4 (4 in 1); QEMU's -smp is a uniform grid",
        ),  # fmt: skip
        ({"nodes": [{"id": 0, "cpus": 0, "memory": 0}, {"id": 1, "cpus": 2, "memory": "256M"}]}, "nodes[0]: a node"),
        ({"nodes": [{"id": 0, "cpus": 2, "memory": 0}, {"id": 1, "cpus": 2, "memory": 0}]}, "at least one node"),
    ],
)
def test_bad_grids_are_one_line_errors(tmp_path: Path, extra: dict, needle: str) -> None:
    import yaml

    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(spec(**extra)))
    proc = numalab("topo", "check", str(path))
    assert_one_line_error(proc, needle)


def test_overrides_lay_the_grid_again_and_the_record_keeps_it() -> None:
    topo = load_topology("spr-2s-2llc").with_overrides(cpus_per_node=8)
    assert topo.cpu_grid.cores_per_cluster == 4 and topo.cpu_grid.llcs_per_node == 2
    assert topology_from_dict(topo.to_dict()) == topo
    with pytest.raises(LabError, match="llcs_per_node"):
        load_topology("spr-2s-2llc").with_overrides(cpus_per_node=3)
    assert load_topology("memoryless-3").with_overrides(mem_per_node_mib=256).memoryless_nodes == [1]


def test_pkg_level_name_follows_the_release() -> None:
    assert [pkg_level_name(r) for r in ("6.1.0-18-amd64", "6.7.1", "6.8.0", "6.12.57+deb13-amd64", "?")] == [
        "DIE", "DIE", "PKG", "PKG", "PKG"]  # fmt: skip


@pytest.mark.parametrize("view", sorted(p.name for p in VIEWS.iterdir()))
def test_real_guests_views_match_the_prediction(view: str) -> None:
    """What guests of each new preset wrote (PRESET: Debian's 6.1; PRESET@6.12: numalab's 6.12 build, whose
    config had no SCHED_CLUSTER then; PRESET@7.3: Debian's 7.3.4 with the fragments of issue 65, /proc/schedstat
    version 17, SCHED_CLUSTER and SCHED_CACHE) matches the prediction, caches and domains included, and on 7.3 the
    cache-aware scheduling line and the SNC-3 fix's NUMA levels too."""
    d = VIEWS / view
    topo = load_topology(view.split("@")[0])
    problems: list[str] = []
    cpus, domains = read_cpus(d, problems), read_sched_domains(d, problems)
    # (a grid shows Intel's CPUID; memoryless-3 has none and keeps QEMU's default, qemu64, an AMD)
    assert problems == [] and cpus["vendor"] == ("GenuineIntel" if topo.cpu_grid else "AuthenticAMD")
    release = (d / "uname.txt").read_text().strip()
    version = view.partition("@")[2] or "6.1"
    assert release.startswith(f"{version}.")
    config = (d / "config").read_text()
    levels = configured_levels(config)
    assert check_cpus(topo, cpus, domains, release, levels) == []
    dmesg = (d / "dmesg-boot.txt").read_text() if (d / "dmesg-boot.txt").is_file() else ""
    sched = sched_topology(topo, FIXING_UP in dmesg)
    assert (sched is not topo) == (view == "gnr-2s-snc3@7.3")  # (7.x's SNC-3 fix, on the one machine it fits)
    assert check_topology(topo, read_topology(d), domains, sched) == []
    if version == "7.3":
        assert (d / "schedstat.txt").read_text().startswith("version 17\n")
        assert kernel_says(dmesg) == predict_sched_cache(topo, levels) == "enabling"
    if view == "srf-2s-modules@7.3":  # an L2 a module, and SCHED_CLUSTER: the CLS level
        assert [x["name"] for x in domains[0]] == ["CLS", "MC", "NUMA"]
    if view == "srf-2s-modules@6.12":  # the L2 is shared, but no CLS level is built without SCHED_CLUSTER
        assert "CLS" not in levels and cpus["cpus"]["0"]["caches"]["L2"] == "0-1"
        assert check_cpus(topo, cpus, domains, release) != []


def test_configured_levels() -> None:
    assert configured_levels(None) == frozenset({"SMT", "CLS", "MC"})
    text = "CONFIG_SCHED_SMT=y\n# CONFIG_SCHED_CLUSTER is not set\nCONFIG_SCHED_MC=y\nCONFIG_SCHED_MC_PRIO=y\n"
    assert configured_levels(text) == frozenset({"SMT", "MC"})
    topo = load_spec(spec(cpus_per_node=8, threads=2, cores_per_cluster=2), "t")
    assert [d["name"] for d in predict_cpus(topo, "6.12.0", configured_levels(text))["cpus"][0]["domains"]] == [
        "SMT", "MC"]  # fmt: skip


def test_a_guest_with_one_llc_a_node_is_a_mismatch(tmp_path: Path) -> None:
    """The same files against a machine that predicts other LLCs: the check can fail, and names the CPU."""
    shutil.copytree(VIEWS / "spr-2s-2llc", tmp_path / "r")
    one_llc = load_spec(spec(cpus_per_node=4, packages=2, memory_per_node="512M", distances=[[10, 21], [21, 10]]), "t")
    cpus = read_cpus(tmp_path / "r")
    problems = check_cpus(one_llc, cpus, read_sched_domains(tmp_path / "r"), "6.1.0")
    assert problems and problems[0].startswith("cpu 0 die siblings '0-1' != predicted '0-3'")


def test_a_damaged_cpus_file_is_named_not_raised(tmp_path: Path) -> None:
    (tmp_path / "cpus.txt").write_bytes(
        b"/sys/devices/system/cpu/cpu0/topology/physical_package_id:x\n"
        b"/sys/devices/system/cpu/cpu99999/topology/core_id:1\n"
        b"/sys/devices/system/cpu/cpu0/cache/index3/shared_cpu_list:0-\xff\n"
    )
    problems: list[str] = []
    got = read_cpus(tmp_path, problems)
    assert got == {"vendor": "", "cpus": {}} and len(problems) == 4  # (the byte that is not UTF-8 twice)


def test_seabios_on_qemu_10_is_refused_for_dies_and_modules() -> None:
    """QEMU 10.0.2 aborts under SeaBIOS with several dies a package and Intel's vendor (encode_topo_cpuid1f,
    measured: `--qemu backports --firmware seabios` on spr-2s-2llc was killed by SIGABRT 0.2 s in)."""
    two_llcs = load_spec(spec(llcs_per_node=2), "t")
    with pytest.raises(LabError, match=r"QEMU 10\.0\.2 aborts under SeaBIOS .*--firmware qboot"):
        check_firmware_can_boot(two_llcs, "", (10, 0, 2))
    check_firmware_can_boot(two_llcs, "/usr/share/qemu/qboot.rom", (10, 0, 2))  # qboot boots it
    check_firmware_can_boot(two_llcs, "", (7, 2, 22))  # QEMU 7.2 boots it under SeaBIOS
    check_firmware_can_boot(load_spec(spec(packages=2), "t"), "", (10, 0, 2))  # one die a package
    check_firmware_can_boot(load_topology("ring-2"), "", (10, 0, 2))


def test_a_die_of_one_core_is_warned_about() -> None:
    one_core = load_spec(spec(cpus_per_node=2, llcs_per_node=2), "t")
    assert any("a die (LLC) or module of one core" in w for w in predicted_warnings(one_core))
    assert predicted_warnings(load_spec(spec(llcs_per_node=2), "t")) == []


def test_sockets_of_three_cpus_are_warned_about() -> None:
    """QEMU 7.2 with Debian's 6.1 hung at boot on 2 sockets of 3 CPUs (docs/qemu-topology.md, case X)."""
    assert any("2 sockets of 3 CPUs" in w for w in predicted_warnings(load_topology("ring-2").with_overrides(3)))
    assert not any("sockets of 3" in w for w in predicted_warnings(load_topology("ring-2").with_overrides(4)))


def test_cpu_model_is_shown_by_qemu_and_kept_by_the_record() -> None:
    """A spec's cpu_model (issue #48: commit 4d6dd05d07d0's fix tests Granite Rapids X, family 6 model 173): TCG's
    -cpu gains family= and model=; under KVM the guest is the host's CPU (-cpu host), as before."""
    topo = load_spec(spec(packages=2, cpu_vendor="intel", cpu_model={"family": 6, "model": 173}), "t")
    assert topo.cpu_grid.cpu_model == (6, 173) and topo.cpu_grid.cpu_model_text == "family 6 model 173 (0xad)"
    argv = qemu_argv(topo, plan_placement(topo, HOST), BOOT)
    assert argv[argv.index("-cpu") + 1] == "qemu64,vendor=GenuineIntel,family=6,model=173"
    kvm = qemu_argv(topo, plan_placement(topo, HOST), replace(BOOT, accel="kvm"))
    assert kvm[kvm.index("-cpu") + 1] == "host"
    with pytest.raises(LabError, match=r"cpu_model: this boot's CPU is -cpu max .*not family 6 model 173"):
        qemu_argv(topo, plan_placement(topo, HOST), replace(BOOT, cpu="max"))
    assert topo.to_dict()["cpu_grid"]["cpu_model"] == {"family": 6, "model": 173}
    assert topology_from_dict(topo.to_dict()) == topo
    assert topo.with_overrides(cpus_per_node=4).cpu_grid.cpu_model == (6, 173)
    assert predict_cpus(topo)["cpu_model"] == {"family": 6, "model": 173}
    # a record from before the field reads as before: no cpu_model, nothing in the grid's dict
    old = load_topology("genoa-nps2")
    assert old.cpu_grid.cpu_model is None and "cpu_model" not in old.to_dict()["cpu_grid"]
    assert "cpu_model" not in predict_cpus(old)


def test_topo_show_prints_the_cpu_model() -> None:
    proc = numalab("topo", "show", "gnr-2s-snc3")
    assert proc.returncode == 0, proc.stderr
    assert "CPUID vendor intel, family 6 model 173 (0xad)" in proc.stdout


def test_a_guest_shown_another_cpu_model_is_a_mismatch(tmp_path: Path) -> None:
    """The guest's CPUID family and model (cpus.txt, from /proc/cpuinfo) against the spec's cpu_model: what a
    real gnr-2s-snc3 guest wrote passes; the same with another model, or none read back, or another vendor, does
    not, and names the field."""
    shutil.copytree(VIEWS / "gnr-2s-snc3", tmp_path / "r")
    topo = load_topology("gnr-2s-snc3")
    cpus = read_cpus(tmp_path / "r")
    assert (cpus["vendor"], cpus["family"], cpus["model"]) == ("GenuineIntel", 6, 173)
    domains = read_sched_domains(tmp_path / "r")
    assert check_cpus(topo, cpus, domains, "6.1.0") == []
    problems = check_cpus(topo, cpus | {"model": 107, "family": 15}, domains, "6.1.0")
    assert problems == [
        "CPUID family 15 model 107 != the spec's family 6 model 173 (cpu_model); under KVM the guest is shown the "
        "host's CPU (-cpu host), under TCG the spec's"
    ]
    unread = {k: v for k, v in cpus.items() if k not in ("family", "model")}
    assert check_cpus(topo, unread, domains, "6.1.0")[0].startswith(
        "the guest's CPUID family and model were not read back; the spec's family 6 model 173 (cpu_model)"
    )
    assert check_cpus(topo, cpus | {"vendor": "AuthenticAMD"}, domains, "6.1.0")[0].startswith(
        "CPUID vendor 'AuthenticAMD' != predicted 'GenuineIntel' (cpu_vendor); under KVM"
    )
    # a guest view from before the init wrote family and model reads without them (genoa-nps2 has no cpu_model)
    old = read_cpus(VIEWS / "genoa-nps2")
    assert "family" not in old and "model" not in old


def test_a_damaged_cpu_model_line_is_named_not_raised(tmp_path: Path) -> None:
    (tmp_path / "cpus.txt").write_text("vendor_id\t: GenuineIntel\ncpu family\t: six\nmodel\t\t: 173\n")
    problems: list[str] = []
    assert read_cpus(tmp_path, problems) == {"vendor": "GenuineIntel", "model": 173, "cpus": {}}
    assert problems == ["cpus.txt line 2: 'cpu family\\t: six' is not a CPU family or model"]

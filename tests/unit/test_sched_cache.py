"""7.x's cache-aware scheduling (issue 65): the prediction from the machine, and the record's view of what the
kernel said (its boot line, its llc_balancing knobs, its LLC sizes)."""

from __future__ import annotations

from pathlib import Path

from lab.analysis.sched_cache import kernel_says, llc_sizes, read_llc_balancing, sched_cache_view
from lab.topology.model.spec import load_spec, load_topology
from lab.topology.predictions.cache_aware import ENABLING, NOT_SUPPORTED, predict_sched_cache
from lab.topology.predictions.cpu_view import ALL_LEVELS

ONE_NODE = {"name": "one-node", "nodes": 1, "cpus_per_node": 4, "memory_per_node": "512M", "distances": [[10]]}


def test_it_is_on_wherever_an_llc_of_several_cpus_has_a_wider_parent() -> None:
    """The kernel's rule (sd_in_multi_llcs): two nodes of one LLC each turn it on (the NUMA parent is wider); a
    one-node machine whose LLC is all of it does not; nodes of one CPU have no LLC domain to aggregate on."""
    assert predict_sched_cache(load_topology("ring-2")) == ENABLING
    assert predict_sched_cache(load_topology("genoa-nps2")) == ENABLING
    assert predict_sched_cache(load_topology("spr-2s-2llc")) == ENABLING
    assert predict_sched_cache(load_spec(ONE_NODE, "one-node")) == NOT_SUPPORTED
    assert predict_sched_cache(load_topology("grid-2x4")) == NOT_SUPPORTED  # 1 CPU a node
    # a kernel without SCHED_MC (nor SMT) has no LLC-sharing domain at all
    assert predict_sched_cache(load_topology("ring-2"), frozenset()) == NOT_SUPPORTED
    assert predict_sched_cache(load_topology("ring-2"), ALL_LEVELS) == ENABLING


def test_the_kernels_own_line_is_read_last_one_wins() -> None:
    log = ("[    0.31] _sched_cache_active_set: enabling cache aware scheduling\n"
           "[    0.52] _sched_cache_active_set: disabling cache aware scheduling\n")  # fmt: skip
    assert kernel_says(log) == "disabling"
    assert kernel_says("[ 0.2] _sched_cache_active_set: cache aware scheduling not supported on this platform\n") == (
        NOT_SUPPORTED
    )
    assert kernel_says("[ 0.2] CPU0 attaching sched-domain(s):\n") is None


def test_llc_balancing_values_are_numbers_or_problems() -> None:
    problems: list[str] = []
    text = "numa_balancing 1\nllc_balancing/enabled 1\nllc_balancing/imb_pct 20\nllc_balancing/epoch_period zz\n"
    assert read_llc_balancing(text, problems, "knobs.txt") == {"enabled": 1, "imb_pct": 20}
    assert problems == ["knobs.txt line 4: 'llc_balancing/epoch_period zz' is not an llc_balancing value"]


def test_llc_sizes_are_the_last_level_caches() -> None:
    first = {"caches": {"L1d": "0", "L2": "0", "L3": "0-1"}, "cache_sizes": {"L2": "512K", "L3": "16384K"}}
    cpus = {"cpus": {"0": first,
                     "2": {"caches": {"L3": "2-3"}, "cache_sizes": {"L3": "16384K"}}}}  # fmt: skip
    assert llc_sizes(cpus) == {"0-1": "16384K", "2-3": "16384K"}
    assert llc_sizes(None) == {}


def _record(d: Path, dmesg: str, knobs: str, end: str | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    (d / "dmesg-boot.txt").write_text(dmesg)
    (d / "knobs.txt").write_text(knobs)
    if end is not None:
        (d / "llc-balancing.end").write_text(end)
    return d


def test_the_view_checks_a_cache_aware_kernel_against_the_prediction(tmp_path) -> None:
    ring2 = load_topology("ring-2")
    config = "CONFIG_SCHED_MC=y\nCONFIG_SCHED_CACHE=y\n"
    on = _record(tmp_path / "on", "x: enabling cache aware scheduling\n", "llc_balancing/enabled 1\n",
                 "llc_balancing/enabled 0\n")  # fmt: skip
    problems: list[str] = []
    view = sched_cache_view(ring2, on, config, None, ALL_LEVELS, problems)
    assert problems == [] and view == {"configured": True, "predicted": ENABLING, "kernel": ENABLING,
                                       "start": {"enabled": 1}, "end": {"enabled": 0}, "llc_sizes": {}}  # fmt: skip
    off = _record(tmp_path / "off", "x: disabling cache aware scheduling\n", "llc_balancing/enabled 0\n")
    assert sched_cache_view(ring2, off, config, None, ALL_LEVELS, problems)["kernel"] == "disabling"
    assert problems == []  # (the machine has it; the tree's user switch was 0 at boot)
    wrong = _record(tmp_path / "wrong", "x: cache aware scheduling not supported on this platform\n", "")
    sched_cache_view(ring2, wrong, config, None, ALL_LEVELS, problems)
    assert problems == ["cache-aware scheduling: the kernel says 'not supported' (dmesg-boot.txt), numalab predicted "
                        "'enabling' for ring-2"]  # fmt: skip
    # a kernel before 7.x: nothing predicted, nothing to check
    old = sched_cache_view(ring2, _record(tmp_path / "old", "", "numa_balancing 1\n"), "CONFIG_SCHED_MC=y\n", None)
    assert old == {"configured": False, "predicted": None, "kernel": None, "start": {}, "end": {}, "llc_sizes": {}}
    # a cache-aware kernel whose boot log does not say: noted in the view, not a topology problem
    silent: list[str] = []
    view = sched_cache_view(ring2, _record(tmp_path / "silent", "", ""), config, None, ALL_LEVELS, silent)
    assert silent == [] and view["problems"] == ["dmesg-boot.txt: the kernel has CONFIG_SCHED_CACHE=y but its boot "
                                                 "log does not say whether cache-aware scheduling is on"]  # fmt: skip


def test_an_llc_balancing_knob_on_a_kernel_without_cache_aware_scheduling_is_one_line_before_the_boot(tmp_path) -> None:
    from types import SimpleNamespace

    import pytest

    from lab.errors import LabError
    from lab.run.batch import check_llc_knobs

    old, new = tmp_path / "old.config", tmp_path / "new.config"
    old.write_text("CONFIG_SCHED_MC=y\n# CONFIG_SCHED_CACHE is not set\n")
    new.write_text("CONFIG_SCHED_MC=y\nCONFIG_SCHED_CACHE=y\n")
    v61, v73 = SimpleNamespace(name="v6.1", config=old), SimpleNamespace(name="v7.3", config=new)
    check_llc_knobs({"llc_balancing/enabled": "0"}, [v73])
    check_llc_knobs({"scan_delay_ms": "100"}, [v61])  # (not a cache-aware knob)
    check_llc_knobs({"llc_balancing/enabled": "0"}, [SimpleNamespace(name="bzimage", config=None)])  # (unknown)
    with pytest.raises(LabError, match=r"^--knob llc_balancing/enabled: kernel v6.1 has no CONFIG_SCHED_CACHE "):
        check_llc_knobs({"llc_balancing/enabled": "0"}, [v73, v61])

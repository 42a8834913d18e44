"""The modelled machine by one name (issue 66): ``--model m1`` is its parts, a part given besides is kept, and a
record says which model its machine was, where it differs, and the known answers behind it; a throughput row
says so too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_analysis import ON

from lab.analysis import verdict as vd
from lab.analysis.caveats import FREE_REMOTE, MODELLED_FLAGS, row_caveat
from lab.cli.main import build_parser, run_options_from_args
from lab.errors import LabError
from lab.run.options import RunOptions
from lab.vm.tcg.clock_options import ClockOptions
from lab.vm.tcg.latency_options import LatencyOptions
from lab.vm.tcg.machine_model import M1, fill, get_model, model_of, model_record, model_words


def _opts(*argv: str) -> RunOptions:
    return run_options_from_args(build_parser().parse_args(["run", *argv]))


def test_m1_is_its_parts_on_the_command_line() -> None:
    o = _opts("--model", "m1")
    got = {k: o.flat()[k] for k, _ in M1.options}
    assert got == {"qemu": "charge", "clock": "virtual", "quantum": 2000, "insns_per_ns": 4,
                   "remote_latency": "slit", "coherence": "off"}  # fmt: skip
    # without it, numalab run's defaults, as before
    plain = _opts()
    assert (plain.vm.qemu, plain.guest_time, plain.latency) == ("", ClockOptions(), LatencyOptions())


def test_a_part_given_besides_the_model_is_kept() -> None:
    o = _opts("--model", "m1", "--quantum", "0", "--clock", "virtual", "--coherence", "on")
    assert (o.guest_time.quantum, o.latency.coherence, o.guest_time.insns_per_ns, o.latency.remote_latency) == (
        0, "on", 4, "slit")  # fmt: skip
    assert fill("m1", {"quantum": None, "clock": "host"})["clock"] == "host"


def test_an_unknown_model_is_one_line() -> None:
    with pytest.raises(LabError, match=r"^--model m9: unknown \(known: m1\)$"):
        get_model("m9")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--model", "m9"])


def _manifest(quantum: int = 2000, insns: int = 4, source: str = "slit", coherence: bool = False,
              ways: int | None = 8) -> dict:  # fmt: skip
    """What a run's manifest says of its machine (the keys the model is read from; ``ways`` None: a record from
    before the cache had ways)."""
    clock = {"mode": "virtual", "insns_per_ns": insns} | ({"parallel": {"quantum_ns": quantum}} if quantum else {})
    return {
        "accelerator": {"name": "tcg", "clock": clock},
        "backend": {"qemu": {"charges_time": True}},
        "remote_latency": {
            "model": {
                "source": source,
                "local_ns": 100.0,
                "streams": {"local_gbs": 10.0},
                "coherence": {"modelled": coherence},
            }
            | ({"ways": ways} if ways is not None else {})
        },  # fmt: skip
    }


def test_a_record_says_which_model_its_machine_was() -> None:
    assert model_record(_manifest()) == {
        "name": "m1",
        "differs": [],
        "known_answers": ["K1 CPU capacity", "K2 locality pays"],
    }
    old = model_record(_manifest(quantum=0, insns=1))  # the command numalab recommended before m1
    assert old == {"name": "m1", "differs": ["quantum 0 (m1: 2000)", "insns_per_ns 1 (m1: 4)"], "known_answers": []}
    assert model_record(_manifest(coherence=True))["differs"] == ["coherence on (m1: off)"]
    # m1's cache has 8 ways: a record from before its ways (direct-mapped) is not that machine, nor is --cache-ways 1
    assert model_record(_manifest(ways=None))["differs"] == ["ways 1 (m1: 8)"]
    assert model_record(_manifest(ways=1))["differs"] == ["ways 1 (m1: 8)"]
    # plain TCG, the host's clock: no model
    assert model_record({"accelerator": {"name": "tcg", "clock": {"mode": "host"}}}) is None
    assert model_record(json.loads((ON[0] / "manifest.json").read_text())) is None
    # a record that wrote its model is read as it wrote it
    assert model_of({"model": {"name": "m1", "differs": ["x"], "known_answers": []}})["differs"] == ["x"]


def test_a_throughput_row_names_the_model_and_its_known_answers() -> None:
    words = model_words([_manifest(), _manifest()])
    assert words == "the modelled machine m1 (known answers: K1 CPU capacity, K2 locality pays)"
    assert row_caveat("workload.gbps", "GB/s", None, words) == f"on {words}"
    assert row_caveat("vmstat.numa_pages_migrated", "pages", None, words) == ""  # a mechanism row: the kernel's
    modified = model_words([_manifest(), _manifest(quantum=0)])
    assert modified == "m1 modified (quantum 0 (m1: 2000)): not the validated machine"
    assert model_words([_manifest(), {"accelerator": {"name": "tcg"}}]) == ""  # a side without the model
    assert row_caveat("workload.gbps", "GB/s", "plain TCG", words).startswith(FREE_REMOTE)


def test_the_verdict_line_of_a_throughput_figure_says_the_machine() -> None:
    base = [json.loads((p / "manifest.json").read_text()) | _manifest() for p in ON]
    new = [json.loads((p / "manifest.json").read_text()) | _manifest() for p in ON]
    (v,) = vd.verdicts_of(base, new, ["workload.gbps"])
    assert (
        "; on the modelled machine m1 (known answers: K1 CPU capacity, K2 locality pays); 6 of 6 runs still migrating"
        in v.line()
    )


def test_the_recommended_command_is_the_model() -> None:
    assert MODELLED_FLAGS == "--model m1"


def test_on_the_model_the_finding_does_not_say_what_the_runs_cannot_show(tmp_path) -> None:
    """The demo's 'cannot show' line is for a VM where remote memory costs nothing; on m1 the workload's row names
    the machine instead."""
    import shutil

    from test_analysis import OFF

    from lab.analysis import compare as cmp
    from lab.analysis import finding
    from lab.analysis.record import RunRecord

    def copies(paths, tag):
        out = []
        for p in paths:
            dest = tmp_path / f"{tag}-{p.name}"
            shutil.copytree(p, dest)
            m = json.loads((dest / "manifest.json").read_text())
            m = m | _manifest() | {"run_id": m["run_id"] + tag}
            m["accelerator"] = json.loads((p / "manifest.json").read_text())["accelerator"] | _manifest()["accelerator"]
            (dest / "manifest.json").write_text(json.dumps(m))
            out.append(RunRecord.load(dest))
        return out

    c = cmp.compare_runs(copies(OFF, "a"), copies(ON, "b"))
    f = finding.finding(c)
    assert f is not None and f.cannot_show is None
    row = next(r for r in c.rows if r.metric.key.startswith("workload.") and r.caveat)
    assert row.caveat.startswith(
        "on the modelled machine m1 (known answers: K1 CPU capacity, K2 locality pays); 3 of 6 runs still"
    )


def test_a_matrix_setting_names_the_model() -> None:
    from lab.matrix.definition import parse_matrix

    data = {"name": "mm", "topologies": ["ring-2"], "kernels": ["stock"],
            "workloads": [{"name": "numa01", "duration": 2}],
            "settings": [{"name": "m1", "model": "m1"}, {"name": "shared", "model": "m1", "quantum": 0}]}  # fmt: skip
    spec = parse_matrix(data, "mm.yaml", "mm")
    m1, shared = list({r.setting.name: r.setting for r in spec.runs}.values())
    assert (m1.qemu, m1.clock, m1.quantum, m1.insns_per_ns, m1.remote_latency, m1.coherence) == (
        "charge",
        "virtual",
        2000,
        4,
        "slit",
        "off",
    )
    assert (shared.quantum, shared.insns_per_ns) == (0, 4)
    with pytest.raises(LabError, match="model"):
        parse_matrix(data | {"settings": [{"name": "x", "model": "m9"}]}, "mm.yaml", "mm")


def test_cache_ways_is_a_part_of_the_model_set_alone() -> None:
    """--cache-ways: the modelled cache's ways (the plugin's ways=), m1's 8 by default; a bad value is one line."""
    assert _opts("--model", "m1").latency.cache_ways is None
    o = _opts("--model", "m1", "--cache-ways", "1")
    assert o.latency.cache_ways == 1
    for bad in ("3", "0", "128"):
        with pytest.raises(LabError, match=rf"^--cache-ways: {bad}: not a power of two from 1 to 64$"):
            _opts("--model", "m1", "--cache-ways", bad).latency.check()
    with pytest.raises(LabError, match=r"^--cache-ways: only with --remote-latency slit or table$"):
        _opts("--cache-ways", "8").latency.check()
    # and the plugin gets it (its header's ways, the manifest's remote_latency.model.ways)
    from lab.topology.model.ref import TopologyRef

    topo = TopologyRef("ring-2").load()
    model = o.latency.model(topo, "virtual", 2000)
    assert model is not None and model.ways == 1 and "ways=1" in model.plugin_args(Path("/tmp/lat.txt"))
    assert _opts("--model", "m1").latency.model(topo, "virtual", 2000).ways == 8

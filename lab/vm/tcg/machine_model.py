"""The modelled machine by one name (``--model m1``): the guest clock, parallel guest time, the modelled CPU's
speed and the memory charge that numalab's known answers validated, as one value, and the words a record and a
verdict row use for it.

A model is a set of run options (``options``: RunOptions fields). ``--model NAME`` fills those a command line did
not give; a part given besides is kept, and the record then says the run's machine differs from the model in it
(``differs``), so no row claims the validation of a machine it did not run. A record says which model its machine
is (the manifest's ``model``, :func:`model_record`), from what the run really had (its clock, its QEMU, its
charge), so a run made with the same flags one by one is the same model, and a record made before the name
existed reads so too.

``m1`` (2026-11-28): numalab's patched QEMU (``--qemu charge``), the guest's clock counting instructions
(``--clock virtual``), each vCPU its own guest time at most 2 µs of guest time ahead of the slowest running one
(``--quantum 2000``), 4 instructions a guest ns, every modelled miss charged by the SLIT (L = 100 ns local,
streams at 10 GB/s; a per-vCPU cache of 8 ways), no coherence. Its known answers are listed in :data:`M1` and
docs/throughput.md ("The modelled machine by one name")."""

from __future__ import annotations

from dataclasses import dataclass

from lab.errors import LabError


@dataclass(frozen=True)
class MachineModel:
    name: str
    summary: str
    options: tuple[tuple[str, object], ...]  # RunOptions field -> value
    known_answers: tuple[str, ...]  # the tests that hold it, by their known answer's short name

    def option_dict(self) -> dict[str, object]:
        return dict(self.options)


M1 = MachineModel(
    name="m1",
    summary="numalab's QEMU, the guest's clock counting instructions, each vCPU its own guest time (2 us quantum), "
    "4 instructions a ns, remote misses charged by the SLIT, no coherence",
    options=(
        ("qemu", "charge"),
        ("clock", "virtual"),
        ("quantum", 2000),
        ("insns_per_ns", 4),
        ("remote_latency", "slit"),
        ("coherence", "off"),
    ),
    known_answers=("K1 CPU capacity", "K2 locality pays"),
)
MODELS: dict[str, MachineModel] = {M1.name: M1}
DEFAULT_MODEL = M1.name
# What a record of the model shows besides its options (the defaults the options imply under --clock virtual):
# a run that changed them (--remote-latency-ns, --remote-bandwidth-gbs, --cache-ways) differs from the model. m1's
# cache has had 8 ways since 2026-11-29 (its known answers were run again so); a record from before has none
# and was direct-mapped: it reads as "ways 1 (m1: 8)".
_REALIZED_DEFAULTS = {"local_ns": 100.0, "local_gbs": 10.0, "ways": 8}


def get_model(name: str) -> MachineModel:
    if name not in MODELS:
        raise LabError(f"--model {name}: unknown (known: {', '.join(MODELS)})")
    return MODELS[name]


def fill(name: str, given: dict[str, object]) -> dict[str, object]:
    """``given`` (the RunOptions fields a command line or a matrix set) with the model's options for those it did
    not set (None or absent)."""
    model = get_model(name)
    return {k: v for k, v in model.option_dict().items() if given.get(k) is None} | {
        k: v for k, v in given.items() if v is not None
    }


def _realized(manifest: dict) -> dict[str, object]:
    """The model's parts as a run record shows what the run had."""
    clock = (manifest.get("accelerator") or {}).get("clock") or {}
    clock = clock if isinstance(clock, dict) else {}
    qemu = (manifest.get("backend") or {}).get("qemu") if isinstance(manifest.get("backend"), dict) else None
    latency = manifest.get("remote_latency") if isinstance(manifest.get("remote_latency"), dict) else {}
    model = latency.get("model") if isinstance(latency.get("model"), dict) else {}
    coherence = model.get("coherence") if isinstance(model.get("coherence"), dict) else {}
    streams = model.get("streams") if isinstance(model.get("streams"), dict) else {}
    parallel = clock.get("parallel") if isinstance(clock.get("parallel"), dict) else {}
    return {
        "qemu": "charge" if isinstance(qemu, dict) and qemu.get("charges_time") else "other",
        "clock": clock.get("mode", "host"),
        "quantum": parallel.get("quantum_ns", 0),
        "insns_per_ns": clock.get("insns_per_ns", 1),
        "remote_latency": model.get("source", "off") if model else "off",
        "coherence": "on" if coherence.get("modelled") else "off",
        "local_ns": model.get("local_ns"),
        "local_gbs": streams.get("local_gbs"),
        "ways": model.get("ways", 1) if model else None,
    }


def model_record(manifest: dict) -> dict | None:
    """The manifest's ``model``: the model whose machine the run had (``name``), the parts in which it differs from
    it (``differs``: "quantum 0 (m1: 2000)"), and the known answers that validated it (only where it differs in
    none); None for a run with no memory charge under the guest's clock (plain TCG, KVM, the host's clock)."""
    got = _realized(manifest)
    if got["clock"] != "virtual" or got["remote_latency"] == "off":
        return None
    model = M1
    want = model.option_dict() | _REALIZED_DEFAULTS
    differs = [f"{k} {got[k]} ({model.name}: {v})" for k, v in want.items() if got.get(k) != v]
    return {
        "name": model.name,
        "differs": differs,
        "known_answers": [] if differs else list(model.known_answers),
    }


def model_of(manifest: dict) -> dict | None:
    """A record's model: its own ``model`` where it wrote one, else read from its parts (records made before)."""
    m = manifest.get("model") if isinstance(manifest, dict) else None
    if isinstance(m, dict) and isinstance(m.get("name"), str):
        return m
    return model_record(manifest) if isinstance(manifest, dict) else None


def model_words(manifests: list[dict]) -> str:
    """What a throughput row's verdict says of the machine it was measured on: "the modelled machine m1 (known
    answers: K1 CPU capacity)", "m1 modified (quantum 0 (m1: 2000)): not the validated machine", or "" where no
    run had the model's charge under the guest's clock (the free-remote caveat speaks there)."""
    records = [model_of(m) for m in manifests]
    if not records or any(r is None for r in records):
        return ""
    differs = sorted({d for r in records for d in r["differs"]})  # type: ignore[index]
    name = records[0]["name"]  # type: ignore[index]
    if differs:
        return f"{name} modified ({'; '.join(differs)}): not the validated machine"
    return f"the modelled machine {name} (known answers: {', '.join(records[0]['known_answers'])})"  # type: ignore[index]

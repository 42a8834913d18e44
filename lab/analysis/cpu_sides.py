"""What CPUs each side of an A/B showed its guests, and the one warning line when the sides differ.

Two sources, the better first: what each guest read back (``guest_topology.readback.cpus``, from its sysfs and
/proc/cpuinfo: lab.analysis.cpu_readback), and, for records made before the guest wrote it, the CPU the
topology spec asked for (``cpu_vendor``, ``cpu_model``). The read-back shape counts packages, dies, LLCs,
clusters and threads a core, so two records of one preset whose grids differ (another spec file under the
same name, another QEMU, KVM's host CPU against TCG's model) do not compare silently."""

from __future__ import annotations

from dataclasses import dataclass

from lab.analysis.record import RunRecord


@dataclass(frozen=True, order=True)
class CpuShape:
    """A guest's CPUs as it read them back: its CPUID identity and its topology's counts."""

    vendor: str
    family: int | None
    model: int | None
    cpus: int
    packages: int
    dies: int
    llcs: int
    clusters: int
    threads: int

    def text(self) -> str:
        ident = self.vendor or "no vendor"
        ident += f" {self.family}/{self.model}" if self.family is not None and self.model is not None else ""
        counts = (
            f"{self.cpus} CPUs, {self.packages} package(s), {self.dies} die(s), {self.llcs} LLC(s), "
            f"{self.clusters} cluster(s), {self.threads} thread(s) a core"
        )
        return f"{ident}: {counts}"


def cpu_shape(seen: dict | None) -> CpuShape | None:
    """The shape of one guest's read-back CPUs (``lab.analysis.cpu_readback.read_cpus``'s value), or None when
    there is none to read (a record from before the guest wrote cpus.txt, or a guest that did not boot)."""
    if not isinstance(seen, dict) or not isinstance(seen.get("cpus"), dict) or not seen["cpus"]:
        return None
    cpus = [c for c in seen["cpus"].values() if isinstance(c, dict)]

    def count(*keys: str) -> int:
        return len({tuple(c.get(k) for k in keys) for c in cpus})

    llcs = {(c.get("caches") or {}).get("L3") or (c.get("caches") or {}).get("L2") for c in cpus}
    threads = max((_cpulist_len(c.get("thread_siblings")) for c in cpus), default=1)
    family, model = seen.get("family"), seen.get("model")
    return CpuShape(
        vendor=str(seen.get("vendor") or ""),
        family=family if isinstance(family, int) else None,
        model=model if isinstance(model, int) else None,
        cpus=len(cpus),
        packages=count("package"),
        dies=count("package", "die"),
        llcs=len(llcs - {None}),
        clusters=count("package", "die", "cluster"),
        threads=threads,
    )


def _cpulist_len(text: object) -> int:
    if not isinstance(text, str) or not text:
        return 1
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        n += int(hi) - int(lo) + 1 if hi else 1
    return n


def shape_of(r: RunRecord) -> CpuShape | None:
    readback = (r.manifest.get("guest_topology") or {}).get("readback")
    return cpu_shape(readback.get("cpus")) if isinstance(readback, dict) else None


def cpu_identity(r: RunRecord) -> tuple[str, tuple[int, int] | None]:
    """The CPU the run's topology asked its guest to be shown: ``cpu_vendor`` ("" where not given) and
    ``cpu_model`` (family, model; None where not given: a record made before the field reads so)."""
    grid = r.topology.cpu_grid
    return (grid.vendor, grid.cpu_model) if grid is not None else ("", None)


def _cpu_identity_text(identity: tuple[str, tuple[int, int] | None]) -> str:
    vendor, model = identity
    said_vendor = f"cpu_vendor {vendor}" if vendor else "no cpu_vendor"
    return f"{said_vendor}, cpu_model {model[0]}/{model[1]}" if model else f"{said_vendor}, no cpu_model"


_CONSEQUENCE = (
    "a kernel path keyed on the CPU's vendor, model or topology may be taken on one side only, so a difference "
    "below may be the CPU's, not the kernel's"
)


def cpu_identity_warning(base: list[RunRecord], new: list[RunRecord]) -> str | None:
    """A loud line when the two sides' guests were shown different CPUs: by what every guest read back where
    each did (vendor, family and model, and the counts of packages, dies, LLCs, clusters and threads), else by
    the specs (vendor, or family and model, or a model on one side only). A kernel path keyed on the CPU
    (commit 4d6dd05d07d0's SNC-3 fix) or on the topology (a cluster level, cache-aware scheduling's LLCs) may run
    on one side only."""
    shapes = [{shape_of(r) for r in runs} for runs in (base, new)]
    if None not in shapes[0] | shapes[1]:
        if shapes[0] == shapes[1]:
            return None
        b, n = (" and ".join(s.text() for s in sorted(side)) for side in shapes)  # type: ignore[union-attr]
        return f"the sides' guests were shown different CPUs, as they read them back (baseline {b}; new {n}): " + (
            _CONSEQUENCE
        )
    sides = [sorted({cpu_identity(r) for r in runs}, key=repr) for runs in (base, new)]
    if sides[0] == sides[1]:
        return None
    b, n = (" and ".join(map(_cpu_identity_text, ids)) for ids in sides)
    return f"the sides' guests were shown different CPUs (baseline {b}; new {n}): {_CONSEQUENCE}"

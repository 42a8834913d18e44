"""A matrix's kernels: every build recipe checked before any build, then each built (or found in the cache)
or resolved, as ``numalab run --kernel`` takes it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lab.errors import LabError
from lab.matrix.definition import MatrixSpec


def check_recipes(spec: MatrixSpec) -> None:
    """Every build recipe's files (source, patches, series, fragments) read and checked, before any build."""
    from lab.kernel.build import recipe_request  # (on use: numalab's start loads this module)

    for k in spec.kernels:
        if k.build is not None:
            try:
                recipe_request(k.name, k.build, Path(spec.source).parent)
            except LabError as err:
                raise LabError(f"{spec.source}: {err}") from None


def _check_recipe_patches(spec: MatrixSpec, progress: Callable[[str], None]) -> None:
    """That every recipe's patches apply to its source (those the cache has built are not checked again), before
    the first build: a later recipe's patch that does not apply is not found an hour of builds in."""
    from lab.kernel.build import check_patches, recipe_request  # (on use: numalab's start loads this module)

    for k in spec.kernels:
        if k.build is not None:
            try:
                check_patches(recipe_request(k.name, k.build, Path(spec.source).parent), progress)
            except LabError as err:
                raise LabError(f"{spec.source}: kernels: {k.name}: {err}") from None


def matrix_kernel_args(spec: MatrixSpec, progress: Callable[[str], None]) -> dict[str, str]:
    """What each kernel is for `numalab run --kernel`; build recipes are built (or found in the cache) first."""
    from lab.kernel.resolve import resolve_kernel  # (on use: numalab's start loads this module)

    check_recipes(spec)  # all of them, before the first build
    _check_recipe_patches(spec, progress)
    out = {}
    for k in spec.kernels:
        if k.build is not None:
            from lab.kernel.build import build_from_recipe  # (on use: numalab's start loads this module)

            progress(f"kernel {k.name}: building (or reusing the cache)")
            out[k.name] = build_from_recipe(k.name, k.build, Path(spec.source).parent, progress)
        else:
            try:
                resolve_kernel(k.spec)
            except LabError as err:
                raise LabError(f"{spec.source}: kernels: {k.name}: {err}") from None
            out[k.name] = k.spec
    return out

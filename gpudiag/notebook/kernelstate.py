"""Python's warning state kept as the kernel had it across gpudiag's own work after a
watched block (the analysis, the report's picture).

A library that gpudiag's analysis calls may enter ``warnings.catch_warnings()`` (matplotlib
does, drawing the breakdown picture): leaving it puts the filters back but counts as a
change of the filters, and Python then forgets every "already shown" mark of every
module's ``__warningregistry__``, so a warning the notebook had seen once (Keras's
``shuffle=True`` one) would be shown again in its next cell, which it is not without
gpudiag. When the filters are the same list again afterwards, the registries that were
current before are marked current again; when they are not (an import added one), nothing
is touched.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import Any


class _Probe(Warning):
    """Never shown: only read for the filters' version."""


def filters_version() -> Any:
    """The version Python gives the filters now, as it writes it into a registry (the C
    implementation keeps it out of reach otherwise): one probe warning, shown to nobody."""
    registry: dict[Any, Any] = {"version": object()}  # never current: replaced
    show = warnings._showwarnmsg  # type: ignore[attr-defined]
    warnings._showwarnmsg = lambda message: None  # type: ignore[attr-defined]
    try:
        warnings.warn_explicit("gpudiag: the filters' version", _Probe, "gpudiag", 0,
                               registry=registry)
    except Exception:  # a filter turning warnings into errors: the version is set first
        pass
    finally:
        warnings._showwarnmsg = show  # type: ignore[attr-defined]
    return registry.get("version")


def _registries() -> Iterator[dict[Any, Any]]:
    for module in list(sys.modules.values()):
        try:  # vars(): a lazily loaded module is not loaded by looking
            registry = vars(module).get("__warningregistry__")
        except TypeError:
            continue
        if isinstance(registry, dict):
            yield registry


@contextlib.contextmanager
def warnings_kept() -> Iterator[None]:
    """Around gpudiag's work in the kernel: what was shown once stays shown once."""
    filters = list(warnings.filters)
    before = filters_version()
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            now = filters_version()
            if now != before and warnings.filters == filters:
                for registry in _registries():
                    if registry.get("version") == before:
                        registry["version"] = now

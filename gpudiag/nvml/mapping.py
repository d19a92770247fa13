"""Which NVML device a TensorFlow logical GPU runs on. Pure: plain data in, plain data out;
no pynvml, no TensorFlow, no environment reads (callers pass CUDA_VISIBLE_DEVICES in).

* :func:`parse_cuda_visible_devices`: the one reader of CUDA_VISIBLE_DEVICES, with every
  rule CUDA applies to it;
* :func:`normalize_pci_bus_id`, :func:`pci_bus_id_from_desc`: PCI bus ids as TensorFlow
  and NVML write them, made comparable;
* :func:`map_logical_to_physical` -> :class:`LogicalGpu` per logical GPU, including N
  logical GPUs split from one physical GPU; :func:`logical_by_physical` groups them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from gpudiag.nvml.records import NOT_AVAILABLE, DeviceInfo

_PCI_RE: Final = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<device>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])$"
)
_DESC_PCI_RE: Final = re.compile(r"pci bus id:\s*([0-9a-fA-F:.]+)")


def normalize_pci_bus_id(bus_id: str) -> str | None:
    """``0000:3b:00.0`` (TensorFlow) and ``00000000:3B:00.0`` (NVML) -> ``0000:3b:00.0``."""
    m = _PCI_RE.match(bus_id.strip())
    if m is None:
        return None
    domain = int(m["domain"] or "0", 16)
    return f"{domain:04x}:{int(m['bus'], 16):02x}:{int(m['device'], 16):02x}.{m['function']}"


def pci_bus_id_from_desc(physical_device_desc: str) -> str | None:
    """The PCI bus id in TensorFlow's ``physical_device_desc``
    ("device: 0, name: NVIDIA A100, pci bus id: 0000:3b:00.0, compute capability: 8.0")."""
    m = _DESC_PCI_RE.search(physical_device_desc)
    return m.group(1) if m else None


@dataclass(frozen=True)
class LogicalGpu:
    """Where one TensorFlow logical GPU runs, in NVML's numbering.

    ``nvml_index`` is None when it could not be resolved (``note`` says why).
    ``method``: ``pci_bus_id`` (exact), ``cuda_visible_devices`` or ``ordinal`` (by order;
    exact only when CUDA_DEVICE_ORDER=PCI_BUS_ID, which is NVML's order).
    """

    logical_name: str
    tf_physical_index: int
    nvml_index: int | None
    pci_bus_id: str | None
    method: Literal["pci_bus_id", "cuda_visible_devices", "ordinal", "unresolved"]
    note: str | None = None


def _leading_ordinal(token: str) -> int | None:
    """The number a CUDA_VISIBLE_DEVICES entry starts with, read as strtoul reads it
    (``"1gpu"`` is 1); None when it does not start with a digit (``"-1"``, ``"abc"``, ``""``)."""
    digits = len(token) - len(token.lstrip("0123456789"))
    return int(token[:digits]) if digits else None


def parse_cuda_visible_devices(
    value: str | None, device_count: int | None = None
) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: the entries that make devices visible, in
    order (ordinals as decimal strings, ``GPU-``/``MIG-`` entries as given).

    - unset (None): None, meaning every device;
    - set but empty: [] (no device);
    - a list of ordinals ends at the first entry that is not one: ``-1``, any negative
      number, a word, an empty entry, or a ``GPU-`` entry (CUDA ignores that entry and
      everything after it, so ``0,2,-1,1`` is ``["0", "2"]`` and ``-1`` is []); an entry
      is read like strtoul, so ``1gpu`` is ordinal 1;
    - a list that starts with ``GPU-`` (a UUID or a unique prefix of one) or ``MIG-``
      ends at the first entry without that prefix;
    - an entry repeated before the list ends makes no device visible: [];
    - with ``device_count`` (the GPUs there are), the list also ends at the first
      ordinal that names no device (``0,9,1`` on 4 GPUs is ``["0"]``).

    The single parser of CUDA_VISIBLE_DEVICES in gpudiag (the env verdicts count with it,
    the logical -> NVML mapping resolves its entries).
    """
    if value is None:
        return None
    tokens = [t.strip() for t in value.split(",")]
    prefix = next((p for p in ("GPU-", "MIG-") if tokens[0].startswith(p)), None)
    out: list[str] = []
    for token in tokens:
        if prefix is not None:
            if not token.startswith(prefix):
                break
            entry = token
        else:
            ordinal = _leading_ordinal(token)
            if ordinal is None:
                break
            entry = str(ordinal)
        if entry in out:
            return []
        out.append(entry)
    if device_count is not None:
        for k, entry in enumerate(out):
            if entry.isdigit() and int(entry) >= device_count:
                return out[:k]
    return out


def _resolve_token(token: str, physical: Sequence[DeviceInfo]) -> tuple[int | None, str | None]:
    if token.isdigit():
        idx = int(token)
        if any(p.index == idx for p in physical):
            return idx, None
        return None, f"CUDA_VISIBLE_DEVICES names GPU {idx}, which NVML does not list"
    if token.startswith("GPU-"):
        matches = [
            p.index
            for p in physical
            if p.uuid is not NOT_AVAILABLE and str(p.uuid).startswith(token)
        ]
        if len(matches) == 1:
            return matches[0], None
        return None, f"CUDA_VISIBLE_DEVICES entry {token} matches {len(matches)} NVML devices"
    return None, f"CUDA_VISIBLE_DEVICES entry {token} is a MIG instance; not mapped"


def map_logical_to_physical(
    logical_details: list[dict[str, Any]],
    cuda_visible_devices: str | None,
    physical: list[DeviceInfo],
    *,
    cuda_device_order: str | None = None,
) -> list[LogicalGpu]:
    """Map TensorFlow's logical GPUs onto NVML devices.

    ``logical_details``: one dict per logical GPU, in TensorFlow's order, with keys
    ``name`` (``/device:GPU:0``), ``physical_index`` (TensorFlow's physical GPU it was
    made from: several logical GPUs split from one physical GPU share it) and, where
    known, ``pci_bus_id`` (from ``physical_device_desc``; ``get_device_details`` gives
    only ``device_name`` and ``compute_capability`` in TF 2.21) and ``device_name``.
    ``physical``: NVML's devices (DeviceInfo from the backend).

    A PCI bus id match is exact. Otherwise TensorFlow's physical GPU k is the k-th entry
    of CUDA_VISIBLE_DEVICES (an index or a GPU-uuid prefix), or CUDA ordinal k when it is
    unset; NVML numbers devices by PCI bus id, so an ordinal is exact only with
    CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default order puts the fastest GPU first).
    """
    by_pci = {
        normalize_pci_bus_id(str(p.pci_bus_id)): p.index
        for p in physical
        if p.pci_bus_id is not NOT_AVAILABLE
    }
    visible = parse_cuda_visible_devices(cuda_visible_devices)
    order_note = (
        None
        if (cuda_device_order or "").upper() == "PCI_BUS_ID"
        else "by CUDA order; exact only with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs"
    )
    out: list[LogicalGpu] = []
    for pos, detail in enumerate(logical_details):
        name = str(detail.get("name", f"/device:GPU:{pos}"))
        k = int(detail.get("physical_index", pos))
        raw_pci = detail.get("pci_bus_id")
        pci = normalize_pci_bus_id(str(raw_pci)) if raw_pci else None
        if pci is not None and pci in by_pci:
            out.append(LogicalGpu(name, k, by_pci[pci], pci, "pci_bus_id"))
            continue
        unmatched = _Unmatched(name, k, pci, raw_pci, order_note)
        if visible is not None:
            out.append(_by_visible_devices(unmatched, visible, physical))
        else:
            out.append(_by_ordinal(unmatched, physical))
    return out


@dataclass(frozen=True)
class _Unmatched:
    """One logical GPU whose PCI bus id matched no NVML device (or was unknown)."""

    name: str
    k: int  # TensorFlow's physical GPU index
    pci: str | None  # normalized PCI bus id, when known
    raw_pci: Any  # the PCI bus id as TensorFlow gave it, when known
    order_note: str | None  # why an ordinal is not exact; None under PCI_BUS_ID order

    @property
    def miss(self) -> str:
        """The note's prefix saying the PCI bus id was not found ("" without one)."""
        return f"PCI bus id {self.raw_pci} not among NVML's devices; " if self.raw_pci else ""

    def unresolved(self, why: str) -> LogicalGpu:
        return LogicalGpu(self.name, self.k, None, self.pci, "unresolved", self.miss + why)


def _by_visible_devices(
    g: _Unmatched, visible: list[str], physical: list[DeviceInfo]
) -> LogicalGpu:
    """TensorFlow's physical GPU k is the k-th entry of CUDA_VISIBLE_DEVICES."""
    if g.k >= len(visible):
        return g.unresolved(f"CUDA_VISIBLE_DEVICES has no entry {g.k}")
    idx, why = _resolve_token(visible[g.k], physical)
    if idx is None:
        return g.unresolved(str(why))
    note = g.order_note if visible[g.k].isdigit() else None
    miss = g.miss
    return LogicalGpu(
        g.name,
        g.k,
        idx,
        g.pci,
        "cuda_visible_devices",
        (miss + note) if note else (miss or None),
    )


def _by_ordinal(g: _Unmatched, physical: list[DeviceInfo]) -> LogicalGpu:
    """CUDA_VISIBLE_DEVICES unset: TensorFlow's physical GPU k is CUDA ordinal k."""
    if not any(p.index == g.k for p in physical):
        return g.unresolved(f"NVML lists no GPU {g.k}")
    miss = g.miss
    return LogicalGpu(
        g.name,
        g.k,
        g.k,
        g.pci,
        "ordinal",
        (miss + str(g.order_note)) if g.order_note else (miss or None),
    )


def logical_by_physical(mapping: Sequence[LogicalGpu]) -> dict[int, list[str]]:
    """NVML index -> the logical GPU names on it (split GPUs give several names)."""
    out: dict[int, list[str]] = {}
    for m in mapping:
        if m.nvml_index is not None:
            out.setdefault(m.nvml_index, []).append(m.logical_name)
    return out

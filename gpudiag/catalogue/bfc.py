"""The BFC allocator's out-of-memory, read from the summary it logs: a fragmented pool (the
free memory in total would hold the tensor, no single free chunk does) told apart from a
full one.

What it reads, as xla/tsl/framework/bfc_allocator.cc writes it (AllocateRawInternal, then
DumpMemoryLog):

- ``Allocator (GPU_0_bfc) ran out of memory trying to allocate 488.28MiB (rounded to
  512000000)requested by op ...``: the request, in bytes;
- ``Total bytes in pool: 40231108608 memory_limit_: 40231108608 ...``: what the pool
  holds (the line of TensorFlow 2.13-2.17 logs; 2.21's binary has "Total size in pool: "
  instead, read alike, its whole line not seen here);
- ``Stats:`` and the lines of AllocatorStats::DebugString
  (xla/stream_executor/allocator_stats.cc: ``Limit:            %20s`` ... with
  HumanReadableNumBytes in TensorFlow 2.21, ``%20lld`` bytes in older releases):
  ``Limit``, ``InUse`` and ``LargestFreeBlock`` (0 in some releases: not read as a size).

Pure: lines in, a record out; no TensorFlow.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

_REQUEST = re.compile(r"Allocator \((?P<allocator>[^)]+)\) ran out of memory trying to "
                      r"allocate \S+ \(rounded to (?P<rounded>\d+)\)")
_STAT = re.compile(r"(?:^|\]\s*|\s)(?P<name>Limit|InUse|LargestFreeBlock):\s+"
                   r"(?P<value>\d+(?:\.\d+)?)(?P<unit>[KMGTPE]iB|B)?\s*$")
_POOL = re.compile(r"Total (?:bytes|size) in pool: (?P<pool>\d+)\b")
_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
          "PiB": 1 << 50, "EiB": 1 << 60}

Kind = Literal["fragmentation", "full", "could-not-grow", "unknown"]


@dataclass(frozen=True)
class BfcOom:
    """One out-of-memory of the BFC allocator with the numbers of its summary (None where
    the summary did not say: the log cut short, INFO lines hidden). The allocator fails
    only when no free chunk holds the request and its pool cannot grow, so enough free
    memory in the pool in total means fragmentation, whatever LargestFreeBlock says (some
    releases print 0 there)."""

    allocator: str
    requested_bytes: int
    limit_bytes: int | None = None
    in_use_bytes: int | None = None
    largest_free_bytes: int | None = None
    pool_bytes: int | None = None  # "Total bytes in pool" (the memory it holds so far)

    @property
    def free_bytes(self) -> int | None:
        """Free in the pool: what it holds (its limit where the line is missing) less what
        is in use."""
        held = self.pool_bytes if self.pool_bytes is not None else self.limit_bytes
        if held is None or self.in_use_bytes is None:
            return None
        return max(0, held - self.in_use_bytes)

    @property
    def kind(self) -> Kind:
        """``fragmentation``: the pool's free memory in total holds the request, no chunk
        does; ``could-not-grow``: it would fit under the limit, but the pool could not grow
        there (the GPU's memory held elsewhere); ``full``: less free than asked;
        ``unknown``: no summary."""
        free = self.free_bytes
        if free is None:
            return "unknown"
        if free >= self.requested_bytes:
            return "fragmentation"
        if self.pool_bytes is not None and self.limit_bytes is not None and \
                self.limit_bytes - (self.in_use_bytes or 0) >= self.requested_bytes:
            return "could-not-grow"
        return "full"

    def describe(self) -> str:
        """One sentence: what the allocator asked for, what was free, which kind."""
        asked = f"{self.allocator} asked for {mib(self.requested_bytes)}"
        free = self.free_bytes
        if free is None:
            return f"{asked}; its summary (INFO lines) was not in the log: full or fragmented " \
                   "cannot be told"
        largest = f", the largest free chunk {mib(self.largest_free_bytes)}" \
            if self.largest_free_bytes else ""
        numbers = (f"{asked} with {mib(free)} free in its pool of "
                   f"{mib(self.pool_bytes or self.limit_bytes or 0)}{largest}")
        return numbers + {
            "fragmentation": ": fragmentation, enough memory free in total but in pieces "
                             "smaller than the tensor",
            "could-not-grow": f": its pool could not grow to its limit of "
                              f"{mib(self.limit_bytes or 0)}: the GPU's memory is held "
                              "elsewhere (another process, or another allocator)",
            "full": ": the pool is full, less free in total than the tensor needs",
        }.get(self.kind, "")


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def _value(m: re.Match[str]) -> int:
    return int(float(m["value"]) * _UNITS[m["unit"] or "B"])


def out_of_memory(lines: Iterable[str]) -> list[BfcOom]:
    """Every out-of-memory in ``lines`` with the Stats of the summary that follows it."""
    found: list[BfcOom] = []
    current: dict[str, int] = {}
    head: tuple[str, int] | None = None
    for line in lines:
        m = _REQUEST.search(line)
        if m:
            if head is not None:
                found.append(_record(head, current))
            head, current = (m["allocator"], int(m["rounded"])), {}
            continue
        if head is None or ":" not in line:
            continue
        s = _STAT.search(line)
        if s and s["name"] not in current:
            current[s["name"]] = _value(s)
        pool = _POOL.search(line)
        if pool and "pool" not in current:
            current["pool"] = int(pool["pool"])
    if head is not None:
        found.append(_record(head, current))
    return found


def _record(head: tuple[str, int], stats: dict[str, int]) -> BfcOom:
    return BfcOom(head[0], head[1], stats.get("Limit"), stats.get("InUse"),
                  stats.get("LargestFreeBlock"), stats.get("pool"))


FRAGMENTATION_FIX = ("Set TF_GPU_ALLOCATOR=cuda_malloc_async in the environment (CUDA's own "
                     "pool allocator does not fragment this way); or a smaller batch.")
FULL_FIX = ("The model does not fit as run: a smaller batch per device, mixed precision "
            "(keras.mixed_precision.set_global_policy('mixed_float16')), fewer tensors kept "
            "alive between steps, or no other process on the GPU (`nvidia-smi`); "
            "TF_GPU_ALLOCATOR=cuda_malloc_async will not help a full pool.")


GROW_FIX = ("Free the GPU for this process: `nvidia-smi` shows who else holds its memory "
            "(another process, a second framework in this one); or a smaller batch.")


def meaning_and_fix(ooms: list[BfcOom]) -> tuple[str, str] | None:
    """What the out-of-memories were and the fix that helps, for run.tf-log (None: none)."""
    if not ooms:
        return None
    first = ooms[0]
    more = f" ({len(ooms)} out-of-memories, the first said)" if len(ooms) > 1 else ""
    fix = {"fragmentation": FRAGMENTATION_FIX, "full": FULL_FIX,
           "could-not-grow": GROW_FIX}.get(
        first.kind, "Read the allocator's summary in the log (its Stats: Limit, InUse, "
        "LargestFreeBlock): " + FRAGMENTATION_FIX + " helps a fragmented pool; " + FULL_FIX)
    return first.describe() + more, fix

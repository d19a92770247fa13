"""Tensors read back to Python by the program's own lines: ``float(loss)``,
``loss.numpy()``, ``int(step)``, ``if tensor:``, ``f"{loss:.4f}"``, ``np.asarray(t)``.
Each waits until the tensor is computed (on a GPU, until the device has finished the step
that makes it) and copies it to the host: a host sync. Once a step, in a custom training
loop, it keeps the host from queueing the next step while the device works.

Every such read goes through ``_EagerTensorBase._numpy``; the hook times it where one of
the program's own frames called it, or called the method that did (past gpudiag's own
gate: its ``float(...)``, its ``.numpy()``),
and aggregates per line in memory (MAX_SITES sites, SAMPLED times per site for the
median). Reads made by TensorFlow, Keras or gpudiag itself cost one frame look-up each.
One ``host_reads`` event holds the sites so far: written at most every flush interval as
reads come, and at the process's exit.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import is_gate, unwrapped, wrap_once
from gpudiag.inprogram.recorder import SiteTable
from gpudiag.layout import loopevents

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

SAMPLED = 2048  # per site, the reads whose own times are kept (their median)
# the method the program called, as its frame's name: how the read is written
HOW = {"__float__": "float()", "__int__": "int()", "__index__": "int()",
       "__bool__": "bool()", "__format__": "a format", "__array__": "np.asarray()",
       "numpy": ".numpy()", "__complex__": "complex()"}


class Reads(SiteTable[tuple[str, int], dict[str, Any]]):
    """One process's reads per (file, line)."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent.config.flush_interval_s)
        self.agent = agent
        self.samples: dict[tuple[str, int], list[float]] = {}

    def record(self, frame: Any, how: str, seconds: float) -> None:
        key = (frame.f_code.co_filename, frame.f_lineno)

        def make() -> dict[str, Any]:
            from gpudiag.inprogram.tracing import user_line

            at = user_line(frame) or {}
            self.samples[key] = []
            return {"file": key[0], "line": key[1], "function": frame.f_code.co_name,
                    "code": str(at.get("code") or "")[:200], "how": how, "reads": 0,
                    "total_s": 0.0, "max_s": 0.0}

        with self.lock:
            site = self.site(key, make)
            if site is None:
                return
            site["reads"] += 1
            site["total_s"] += seconds
            site["max_s"] = max(site["max_s"], seconds)
            if len(self.samples[key]) < SAMPLED:
                self.samples[key].append(seconds)
        self.emit_when_due()

    def emit(self) -> None:
        self.last_emit = time.monotonic()
        with self.lock:
            sites = []
            for key, site in self.sites.items():
                ordered = sorted(self.samples[key])
                sites.append({**site, "total_s": round(site["total_s"], 6),
                              "max_s": round(site["max_s"], 6),
                              "median_s": round(ordered[len(ordered) // 2], 6)})
        if sites:
            self.agent.emit(loopevents.HostReads(sites=sites, left_out_reads=self.left_out))

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        getframe, clock = sys._getframe, time.perf_counter

        @functools.wraps(original)
        def _numpy(tensor: Any) -> Any:
            try:  # past the hook's gate, the program's frame or the method it called
                # (float(), .numpy()) and the program's frame that called it
                caller: Any = None
                frame: Any = getframe(1)
                while frame is not None and is_gate(frame.f_code):
                    frame = frame.f_back
                if frame is not None and not self.mine(frame.f_code):
                    caller, frame = frame, frame.f_back
                if frame is None or not self.mine(frame.f_code):
                    return original(tensor)
            except Exception:
                return original(tensor)
            t0 = clock()
            out = original(tensor)
            seconds = clock() - t0
            try:
                name = caller.f_code.co_name if caller is not None else ""
                self.record(frame, HOW.get(name, ".numpy()"), seconds)
            except Exception as exc:
                self.agent.hook_error("a tensor read's timing", exc)
            return out

        return _numpy


def install(agent: Agent, tf: ModuleType) -> None:
    """Time the program's reads of eager tensors (after ``import tensorflow``)."""
    from tensorflow.python.framework import ops

    if unwrapped(ops._EagerTensorBase, "_numpy", missing_ok=True) is None:
        return
    reads = Reads(agent)
    wrap_once(ops._EagerTensorBase, "_numpy", reads.wrap)
    agent.on_exit(reads.emit)

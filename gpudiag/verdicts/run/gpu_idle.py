"""A GPU idle for the last minute while another works, decided from NVML's polls as they
come (gpudiag.run.live tells the terminal at once) and again over the whole run at the end
(``run.gpu-idle``). Pure: plain polls in, plain records out.

A GPU is idle when every NVML poll of it (nvidia-smi's ``utilization.gpu``) read 0 % for
at least IDLE_WINDOW_S, and another sampled GPU worked over that same last window: the
median of its polls in the window at or above the run's ``--idle-threshold``. The GPUs
are those gpudiag samples for the run (``--gpus``, default every GPU NVML sees): NVML's
per-process list cannot say which GPU is the program's in a container (its pids are the
host's), so the sampled set stands for "the GPUs the program uses".
"""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

from gpudiag.nvml import NOT_AVAILABLE, Sample
from gpudiag.report import Finding

#: How long a GPU must read 0 % while another works before it is named idle, seconds.
IDLE_WINDOW_S: Final = 60.0
FINDING_ID: Final = "run.gpu-idle"


@dataclass(frozen=True)
class Poll:
    """One NVML poll of one GPU: seconds since sampling began, its wall time, utilization."""

    t_s: float
    wall_s: float
    index: int
    util_percent: float


@dataclass(frozen=True)
class IdleGpu:
    """GPU ``index`` read 0 % from ``since_s`` to ``until_s`` (seconds since sampling began)
    while the GPUs of ``working`` (index, median utilization over the window) worked."""

    index: int
    since_s: float
    since_wall_s: float
    until_s: float
    told_wall_s: float
    working: tuple[tuple[int, float], ...]

    def line(self, window_s: float) -> str:
        """What the terminal and TensorBoard's Text tab are told, as it is decided."""
        others = ", ".join(f"GPU {i} at {u:.0f} %" for i, u in self.working)
        return (f"GPU {self.index} has shown 0 % utilization for the last "
                f"{self.until_s - self.since_s:.0f} s (since "
                f"{time.strftime('%H:%M:%S', time.localtime(self.since_wall_s))}) while "
                f"{others} worked (median over the last {window_s:.0f} s)")


def polls_of(samples: Iterable[Sample]) -> list[Poll]:
    """NVML's polls that read a utilization (a GPU without one is never named idle)."""
    return [Poll(s.t_s, s.wall_time_s, s.index, float(s.state.util_gpu_percent))
            for s in samples if s.state.util_gpu_percent is not NOT_AVAILABLE]


class IdleWatch:
    """Fed the polls in time order; says each GPU once per idle stretch (again after it
    worked in between). ``found`` holds every stretch, its ``until_s`` kept up to date."""

    def __init__(self, threshold_percent: float, window_s: float = IDLE_WINDOW_S) -> None:
        self.threshold_percent = threshold_percent
        self.window_s = window_s
        self.found: list[IdleGpu] = []
        self._recent: dict[int, deque[Poll]] = {}
        self._zero_since: dict[int, Poll] = {}
        self._open: dict[int, int] = {}  # GPU -> its stretch in found, while still at 0 %

    def feed(self, polls: Iterable[Poll]) -> list[IdleGpu]:
        """Take new polls; return the stretches that just reached the window."""
        new: list[IdleGpu] = []
        for p in polls:
            recent = self._recent.setdefault(p.index, deque())
            recent.append(p)
            while recent and recent[0].t_s < p.t_s - self.window_s:
                recent.popleft()
            if p.util_percent > 0:
                self._zero_since.pop(p.index, None)
                self._open.pop(p.index, None)
                continue
            since = self._zero_since.setdefault(p.index, p)
            if p.index in self._open:
                k = self._open[p.index]
                old = self.found[k]
                self.found[k] = IdleGpu(old.index, old.since_s, old.since_wall_s, p.t_s,
                                        old.told_wall_s, old.working)
            elif p.t_s - since.t_s >= self.window_s:
                working = self._working(p.index, p.t_s)
                if working:
                    gpu = IdleGpu(p.index, since.t_s, since.wall_s, p.t_s, p.wall_s, working)
                    self._open[p.index] = len(self.found)
                    self.found.append(gpu)
                    new.append(gpu)
        return new

    def _working(self, idle: int, now_s: float) -> tuple[tuple[int, float], ...]:
        out = []
        for i, recent in sorted(self._recent.items()):
            utils = [p.util_percent for p in recent if p.t_s >= now_s - self.window_s]
            if i != idle and utils and statistics.median(utils) >= self.threshold_percent:
                out.append((i, statistics.median(utils)))
        return tuple(out)


def replay(polls: Sequence[Poll], threshold_percent: float,
           window_s: float = IDLE_WINDOW_S) -> list[IdleGpu]:
    """Every idle stretch of a whole run (the polls of every GPU, any order)."""
    watch = IdleWatch(threshold_percent, window_s)
    watch.feed(sorted(polls, key=lambda p: (p.t_s, p.index)))
    return watch.found


def gpu_idle(found: Sequence[IdleGpu], *, gpus: int, observed_s: float | None,
             window_s: float = IDLE_WINDOW_S, unavailable: str | None = None) -> Finding:
    """``run.gpu-idle``: a GPU at 0 % for the window while another worked, at any time."""
    if unavailable is not None:
        return Finding(FINDING_ID, "skip", f"no NVML samples: {unavailable}",
                       title="no NVML samples: idle GPUs not watched")
    if gpus < 2:
        return Finding(FINDING_ID, "skip", f"{gpus} GPU sampled: no other GPU to compare "
                       "its utilization with",
                       title=f"{gpus} GPU sampled: no other GPU to compare with")
    if not found:
        if observed_s is not None and observed_s < window_s:
            return Finding(FINDING_ID, "skip", f"sampled for {observed_s:.0f} s, less than "
                           f"the {window_s:.0f} s a GPU must stay at 0 % to be named idle",
                           title=f"sampled {observed_s:.0f} s, under the {window_s:.0f} s idle "
                                 "window")
        return Finding(FINDING_ID, "ok", f"no GPU stayed at 0 % for {window_s:.0f} s while "
                       "another worked",
                       title=f"no GPU stayed at 0 % for {window_s:.0f} s while another worked")
    parts = [f"GPU {g.index} at 0 % for {g.until_s - g.since_s:.0f} s (from {g.since_s:.0f} s "
             f"to {g.until_s:.0f} s into the run) while "
             + ", ".join(f"GPU {i} worked (median {u:.0f} %)" for i, u in g.working)
             for g in found]
    evidence = {"window_s": window_s, "idle": [
        {"index": g.index, "since_s": round(g.since_s, 3), "until_s": round(g.until_s, 3),
         "since_unix_s": g.since_wall_s, "told_unix_s": g.told_wall_s,
         "working": [{"index": i, "util_median_percent": u} for i, u in g.working]}
        for g in found]}
    g = found[0]
    return Finding(FINDING_ID, "warn", "; ".join(parts), evidence, title=(
        f"GPU {g.index} idle {g.until_s - g.since_s:.0f} s while another worked"
        + (f" (+{len(found) - 1} more)" if len(found) > 1 else "")), advice=(
        "A GPU the run samples did nothing for a minute while another worked: a strategy "
        "over fewer devices than the machine has, work pinned with tf.device, or a data "
        "split that left it without batches. Give the program every GPU (MirroredStrategy "
        "without a device list) or start it on the GPUs it uses (--gpus, "
        "CUDA_VISIBLE_DEVICES)."))

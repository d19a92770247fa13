"""Keras calls made one by one from the program's own loop: every ``Model.predict``,
``predict_on_batch``, ``fit``, ``train_on_batch``, ``evaluate``, ``test_on_batch`` and
``__call__`` the program makes, timed at its call site.

A reinforcement-learning agent that calls ``model.predict(state)`` and
``model.fit(state, target, epochs=1)`` once per sample pays Keras's per-call work (a data
adapter, an iterator, callbacks, a progress bar) on every call, for a model of a few
thousand FLOPs: no training loop there passes its warm-up, yet all the program's time is
in these calls.

Each call the program makes (the outermost one: calls Keras makes inside another timed
call, ``model(x)`` while ``predict`` traces its step, are not counted again) costs two
clock reads and a walk up to the program's own frame (a ``model(x)`` while a tf.function
traces is part of its graph, not a call: left out); per call site, how many calls were on
another model object than the site's previous one (a model built anew for every fit) and
how long tf.function tracing took inside the calls. What is kept is aggregated per call
site (method, file, line) in memory, bounded (MAX_SITES sites, SAMPLED times per site
for the median). One ``keras_calls`` event holds the sites so far: written at most every
flush interval as calls come, and at the process's exit. With them, the process's
resident memory (``/proc/self/statm``: one small read) after every stride-th call, at most
MAX_POINTS points (when full, every other point is dropped and the stride doubles): whether
memory over the loop levels off or keeps growing.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram import tracing
from gpudiag.inprogram.agent import caller_frame, patch
from gpudiag.inprogram.recorder import SiteTable
from gpudiag.layout import loopevents

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

METHODS = ("predict", "predict_on_batch", "fit", "train_on_batch", "evaluate",
           "test_on_batch", "__call__")
SAMPLED = 2048  # per site, the calls whose own times are kept (their median)
MAX_POINTS = 128  # the process's memory after a call: every stride-th call, stride doubling


class Site:
    """One call site's calls: counts, times, the rows (leading dimension) each call had."""

    def __init__(self, method: str, where: dict[str, Any] | None, model: str) -> None:
        self.method, self.where, self.model = method, where or {}, model
        self.calls = 0
        self.models = 0  # calls on another model object than the site's previous call
        self.last_model: Any = None  # a weak reference to the previous call's model
        self.trace_s = 0.0  # tf.function tracing inside the calls (Keras's own functions)
        self.total_s = 0.0
        self.first_s = 0.0
        self.max_s = 0.0
        self.samples: list[float] = []  # the calls after the first (it builds and traces)
        self.rows_min: int | None = None
        self.rows_max: int | None = None

    def add(self, seconds: float, rows: int | None, model: Any, trace_s: float) -> None:
        self.calls += 1
        self.trace_s += trace_s
        last = self.last_model() if self.last_model is not None else None
        if last is not model:  # a new model (one freed since: its reference is dead)
            self.models += 1
            try:
                self.last_model = weakref.ref(model)
            except TypeError:
                self.last_model = None
        self.total_s += seconds
        self.max_s = max(self.max_s, seconds)
        if self.calls == 1:
            self.first_s = seconds
        elif len(self.samples) < SAMPLED:
            self.samples.append(seconds)
        if rows is not None:
            self.rows_min = rows if self.rows_min is None else min(self.rows_min, rows)
            self.rows_max = rows if self.rows_max is None else max(self.rows_max, rows)

    def to_dict(self) -> dict[str, Any]:
        ordered = sorted(self.samples)
        median = ordered[len(ordered) // 2] if ordered else None
        return {"method": self.method, "file": self.where.get("file"),
                "line": self.where.get("line"), "function": self.where.get("function"),
                "code": (self.where.get("code") or "")[:200], "model": self.model,
                "calls": self.calls, "total_s": round(self.total_s, 6),
                "models": self.models, "trace_s": round(self.trace_s, 6),
                "first_s": round(self.first_s, 6), "max_s": round(self.max_s, 6),
                "median_s": None if median is None else round(median, 6),
                "rows_min": self.rows_min, "rows_max": self.rows_max}


def rows_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """The leading dimension of a call's first input (an array, a tensor, a list or dict
    of them); None where it has none (a dataset, a generator)."""
    x = args[0] if args else kwargs.get("x", kwargs.get("inputs"))
    if isinstance(x, list | tuple) and x:
        x = x[0]
    elif isinstance(x, dict) and x:
        x = next(iter(x.values()))
    shape = getattr(x, "shape", None)
    try:
        return int(shape[0]) if shape is not None and len(shape) > 0 else None
    except (TypeError, ValueError):
        return None  # an unknown (symbolic) dimension


class CallTimes(SiteTable[tuple[str, str, int], Site]):
    """The sites of one process, and when they were last written."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(agent.config.flush_interval_s)
        self.agent = agent
        self.first_t: float | None = None  # Unix s of the first call's start
        self.local = threading.local()
        self.calls = 0
        self.stride = 1
        self.rss: list[list[int]] = []  # [call number, resident bytes] after that call
        self.page = _page_size()

    def record(self, method: str, model: Any, frame: Any, seconds: float,
               rows: int | None, trace_s: float = 0.0) -> None:
        user = self._user_frame(frame)
        key = (method, user.f_code.co_filename if user else "?", user.f_lineno if user else 0)
        with self.lock:
            site = self.site(key, lambda: Site(
                method, tracing.user_line(user) if user else None, type(model).__name__))
            if site is None:
                return
            site.add(seconds, rows, model, trace_s)
            self.calls += 1
            if self.page and self.calls % self.stride == 0:
                self._memory()
        self.emit_when_due()

    def _user_frame(self, frame: Any) -> Any:
        """The program's innermost frame from ``frame`` outwards (None: none within 30);
        whether a code object is the program's is asked once (:meth:`SiteTable.mine`)."""
        for _ in range(30):
            if frame is None:
                return None
            if self.mine(frame.f_code):
                return frame
            frame = frame.f_back
        return None

    def _memory(self) -> None:
        """The resident memory now (statm's second field, in pages), thinned to a bound."""
        try:
            resident = int(Path("/proc/self/statm").read_bytes().split()[1]) * self.page
        except (OSError, ValueError, IndexError):
            self.page = 0  # not Linux, or unreadable: no memory series
            return
        self.rss.append([self.calls, resident])
        if len(self.rss) >= MAX_POINTS:
            self.rss = self.rss[1::2]
            self.stride *= 2

    def emit(self) -> None:
        self.last_emit = time.monotonic()
        with self.lock:
            sites = [s.to_dict() for s in self.sites.values()]
            rss = [list(p) for p in self.rss]
        if sites:
            self.agent.emit(loopevents.KerasCalls(sites=sites, left_out_calls=self.left_out,
                                              first_call_t_unix_s=self.first_t,
                                              rss_after_calls=rss))

    def wrap(self, method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        local, clock = self.local, time.perf_counter
        traced = tracing.CLOCK

        @functools.wraps(original)
        def timed(model: Any, *args: Any, **kwargs: Any) -> Any:
            if getattr(local, "depth", 0) or not _eager():  # inside another timed call
                return original(model, *args, **kwargs)  # (Keras's own), or a trace
            local.depth = 1
            traced_s = traced.seconds
            t0 = clock()
            try:  # the program's exceptions: patch()'s gate drops gpudiag's frames
                return original(model, *args, **kwargs)
            finally:
                seconds = clock() - t0
                local.depth = 0
                self._after(method, model, args, kwargs, (seconds, traced.seconds - traced_s))

        timed.__gpudiag_wrapped__ = original  # type: ignore[attr-defined]
        return timed

    def _after(self, method: str, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
               times: tuple[float, float]) -> None:
        seconds, trace_s = times
        try:
            if self.first_t is None:
                self.first_t = time.time() - seconds
            self.record(method, model, caller_frame(2), seconds, rows_of(args, kwargs),
                        trace_s)
        except Exception as exc:
            self.agent.hook_error(f"Model.{method} timing", exc)


def install(agent: Agent, keras: ModuleType) -> None:
    """Time the calls of ``keras.Model``'s methods (after kerashooks: fit is its wrapper)."""
    model_cls = getattr(keras, "Model", None)
    if model_cls is None or getattr(model_cls, "__gpudiag_calls__", False):
        return
    times = CallTimes(agent)
    for method in METHODS:
        original = getattr(model_cls, method, None)
        if callable(original):
            patch(model_cls, method, times.wrap(method, original))
    patch(model_cls, "__gpudiag_calls__", True)
    agent.on_exit(times.emit)


def _eager() -> bool:
    """Whether TensorFlow executes eagerly here: not while a tf.function traces the
    program's step (``model(x)`` inside it is part of the graph, not a call of its loop).
    True where TensorFlow is not loaded (another Keras backend)."""
    tf = sys.modules.get("tensorflow")
    try:
        return bool(tf.executing_eagerly()) if tf is not None else True
    except Exception:
        return True


def _page_size() -> int:
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 0

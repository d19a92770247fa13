"""The time the program's own Keras callbacks take inside ``fit``.

For each callback the program hands to ``fit`` (gpudiag.inprogram.kerashooks), each hook
method its class overrides (batch begin/end, epoch begin/end; Keras's own no-op methods
are left alone) is timed for that fit: the instance gets a timing wrapper of its bound
method (an instance attribute, removed when fit returns), which adds the call's seconds
to the callback's totals; a hook calling another timed hook of the same callback (Keras's
``on_train_batch_end`` calling ``on_batch_end``) counts once. Two clock reads per timed
call, none for callbacks that override no hook.

A callback of Keras's own (ModelCheckpoint, TensorBoard, ...: its hooks in Keras's files,
not the program's) is placed at the program's line that passed it to ``fit`` (the fit
call), never at Keras's file, and carries the settings that decide its cost
(``save_freq``, ``update_freq``, ...). Each hook keeps its first SAMPLED calls' times too:
their median is a typical batch's cost (a save every N batches is rare; the whole run's
total holds it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from gpudiag.inprogram.agent import drop_own_frames
from gpudiag.inprogram.functions import code_of
from gpudiag.inprogram.usercode import is_user_file

BATCH_HOOKS = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin",
               "on_batch_end")
EPOCH_HOOKS = ("on_epoch_begin", "on_epoch_end")
SAMPLED = 4096  # calls per hook whose own times are kept (their median: a typical call)
# a built-in callback's settings that decide its cost (ModelCheckpoint, TensorBoard,
# BackupAndRestore, CSVLogger ...), recorded when plain values
SETTINGS = ("save_freq", "save_weights_only", "save_best_only", "update_freq",
            "histogram_freq", "write_graph", "write_images", "profile_batch", "period")


class Timed:
    """One callback's timed hooks: {method: [calls, total_s, max_s]}."""

    def __init__(self, callback: Any, base: type, passed_at: dict[str, Any] | None = None
                 ) -> None:
        self.callback = callback
        self.cls = type(callback)
        self.methods: dict[str, list[float]] = {}
        self.samples: dict[str, list[float]] = {}
        self.depth = 0
        self.wrapped: list[str] = []
        first: Any = None
        for name in (*BATCH_HOOKS, *EPOCH_HOOKS):
            mine = getattr(self.cls, name, None)
            if mine is None or mine is getattr(base, name, None) or name in vars(callback):
                continue
            setattr(callback, name, self._wrap(name, getattr(callback, name)))
            self.wrapped.append(name)
            first = first or code_of(mine)
        self.where = None if first is None else {"file": first.co_filename,
                                                 "line": first.co_firstlineno}
        self.builtin = first is not None and not is_user_file(first.co_filename)
        if self.builtin and passed_at is not None:  # Keras's own: the program's fit line
            self.where = {"file": passed_at.get("file"), "line": passed_at.get("line"),
                          "code": passed_at.get("code")}
        self.settings = {k: v for k in SETTINGS
                         if isinstance(v := getattr(callback, k, None), bool | int | float | str)}

    def _wrap(self, name: str, bound: Callable[..., Any]) -> Callable[..., Any]:
        stats = self.methods.setdefault(name, [0, 0.0, 0.0])
        sample = self.samples.setdefault(name, [])
        clock = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.depth += 1
            t0 = clock()
            try:
                return bound(*args, **kwargs)
            except BaseException as exc:  # the program's callback's: its traceback as
                drop_own_frames(exc)  # plainly, without this frame
                raise
            finally:
                self.depth -= 1
                if self.depth == 0:
                    dt = clock() - t0
                    stats[0] += 1
                    stats[1] += dt
                    stats[2] = max(stats[2], dt)
                    if len(sample) < SAMPLED:
                        sample.append(dt)

        return timed

    def restore(self) -> None:
        for name in self.wrapped:
            self.callback.__dict__.pop(name, None)
        self.wrapped = []

    def to_dict(self) -> dict[str, Any]:
        methods = {name: {"calls": int(c), "total_s": t, "max_s": m,
                          "median_s": _median(self.samples.get(name) or [])}
                   for name, (c, t, m) in self.methods.items()}
        return {"class": self.cls.__qualname__, "module": self.cls.__module__,
                **(self.where or {"file": None, "line": None}), "methods": methods,
                "builtin": self.builtin, "settings": self.settings}


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def time_callbacks(callbacks: Sequence[Any], base: type,
                   passed_at: dict[str, Any] | None = None) -> list[Timed]:
    """Timing for each callback that overrides a hook (those fit makes itself, History and
    the progress bar, are not among them); ``passed_at``: the program's fit call."""
    out = []
    for callback in callbacks:
        if isinstance(callback, base):
            timed = Timed(callback, base, passed_at)
            if timed.wrapped:
                out.append(timed)
    return out

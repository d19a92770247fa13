"""A daemon thread that calls one function every so many seconds until it is stopped
(parent side): the live views' poll (gpudiag.run.live), the status line's redraw
(gpudiag.run.statusline), the progress of `scaling`'s children (gpudiag.commands.scaling)."""

from __future__ import annotations

import threading
from collections.abc import Callable


class Every:
    """``work()`` every ``period_s`` seconds in a daemon thread named ``name``, from
    ``start`` until ``stop``. An exception in it ends the thread (the caller guards what
    may fail)."""

    def __init__(self, period_s: float, work: Callable[[], None], name: str) -> None:
        self.period_s, self.work = period_s, work
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.work()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float | None = None) -> bool:
        """No more calls; the one under way waited for, ``timeout_s`` at most (when the
        thread was started). True when the thread has ended or never started."""
        self._stop.set()
        if self._thread.ident is not None:
            self._thread.join(timeout_s)
        return not self._thread.is_alive()

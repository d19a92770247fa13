"""A clock that moves only when a test says so: gpudiag.nvml.Clock for the Sampler, and
the time of the scripted fake backend (tests/fake_nvml.py), so no test sleeps.

Threads that call ``wait(stop, timeout_s)`` block until ``advance`` moves time to their
deadline or their ``stop`` event is set. ``advance(seconds)`` moves time from deadline to
deadline: at each one it wakes the threads that are due and waits until they are all
back in ``wait`` before it goes on, so every poll happens at an exact instant and the
same test gives the same samples on an idle machine and on a loaded one.

``parties`` is how many threads wait on the clock (the Sampler has two: its fast and its
slow loop); ``advance`` first waits for that many to be waiting. A thread that stops
waiting for good (its stop event set) no longer counts.
"""

from __future__ import annotations

import threading

#: Real seconds ``advance`` waits for the threads to come back before it calls it a bug.
SETTLE_TIMEOUT_S = 30.0
#: Real seconds a waiting thread sleeps between looks at its stop event (only how fast a
#: stopped thread notices; simulated time never depends on it).
STOP_POLL_S = 0.005


class FakeClock:
    def __init__(self, *, parties: int = 0, wall_start_s: float = 1_750_000_000.0) -> None:
        self._now = 0.0
        self._wall0 = wall_start_s
        self._parties = parties
        self._stopped = 0
        self._deadlines: dict[int, float] = {}  # waiting thread -> its deadline
        self._cond = threading.Condition()

    # -- gpudiag.nvml.Clock

    def monotonic(self) -> float:
        with self._cond:
            return self._now

    def time(self) -> float:
        return self._wall0 + self.monotonic()

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        me = threading.get_ident()
        with self._cond:
            deadline = self._now + max(timeout_s, 0.0)
            self._deadlines[me] = deadline
            self._cond.notify_all()
            try:
                while not stop.is_set() and self._now < deadline:
                    self._cond.wait(STOP_POLL_S)
            finally:
                del self._deadlines[me]
                if stop.is_set():
                    self._stopped += 1
                self._cond.notify_all()
            return stop.is_set()

    # -- for the test

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds``, waking every waiting thread at its deadline."""
        if seconds < 0:
            raise ValueError("time does not go back")
        with self._cond:
            target = self._now + seconds
            while True:
                self._settle()
                due = [d for d in self._deadlines.values() if d <= target]
                if not due:
                    break
                self._now = min(due)
                self._cond.notify_all()
            self._now = target

    def _settle(self) -> None:
        def quiet() -> bool:
            return (len(self._deadlines) + self._stopped >= self._parties
                    and all(d > self._now for d in self._deadlines.values()))

        if not self._cond.wait_for(quiet, timeout=SETTLE_TIMEOUT_S):
            raise AssertionError(
                f"FakeClock: {self._parties} thread(s) expected in wait(), "
                f"{len(self._deadlines)} there at t={self._now}"
            )

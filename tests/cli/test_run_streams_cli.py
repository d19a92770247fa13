"""gpudiag.run.streams: what reaches the user's terminal, line by line (real TF 2.21 text)."""

from __future__ import annotations

import os
import signal
import threading
from io import BytesIO
from pathlib import Path

import pytest

from gpudiag.run import streams, survivors
from gpudiag.run.streams import FilterState, LineFilter


def test_a_settle_a_signal_interrupted_goes_on_where_it_was(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a descendant holds both pipes open; SIGTERM (gpudiag's handler raises
    # KeyboardInterrupt) arrives just as the first pipe was handed to its forwarder; the
    # settle run again after it hands the second over and not the first again (its
    # descriptor is closed: a second close was EBADF, or closed another file by its number)
    pipes = [os.pipe(), os.pipe()]
    shows = [(tmp_path / "out").open("wb"), (tmp_path / "err").open("wb")]
    pumps = [streams.pump(r, BytesIO(), show, LineFilter(FilterState(), name))
             for (r, _), show, name in zip(pipes, shows, ("stdout", "stderr"), strict=True)]
    handed: list[int] = []
    real = survivors.hand_over

    def signalled_once(fd: int, out_fd: int) -> int | None:
        handed.append(fd)
        pid = real(fd, out_fd)
        if len(handed) == 1:
            os.kill(os.getpid(), signal.SIGTERM)
            # once the signal has reached the process (its byte on the wake-up pipe), the
            # main thread takes the GIL again: where Python runs the handlers of signals
            # another thread received
            os.read(woken_r, 1)
        return pid

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    # another thread that takes the signal and runs Python, as gpudiag's own threads do:
    # the kernel gives a process's signal to a thread that does not block it, and Python
    # runs its handler in the main thread at the next switch between the threads,
    # whatever the main thread blocks
    other_ends = threading.Event()

    def runs_python() -> None:
        while not other_ends.wait(0.0005):
            pass

    other = threading.Thread(target=runs_python, daemon=True)
    other.start()
    woken_r, woken_w = os.pipe()
    os.set_blocking(woken_w, False)
    previous_wakeup = signal.set_wakeup_fd(woken_w)
    previous = signal.signal(signal.SIGTERM, interrupt)
    monkeypatch.setattr(survivors, "hand_over", signalled_once)
    monkeypatch.setattr(survivors, "holders", lambda ends: [])
    monkeypatch.setattr(survivors, "AFTER_END_S", 0.05)
    try:
        with pytest.raises(KeyboardInterrupt):
            survivors.settle(pumps, set(), shows)
        settled = survivors.settle(pumps, set(), shows)
    finally:
        signal.signal(signal.SIGTERM, previous)
        signal.set_wakeup_fd(previous_wakeup)
        other_ends.set()
        os.close(woken_r)
        os.close(woken_w)
    assert handed == [pipes[0][0], pipes[1][0]]  # each pipe once
    assert settled.held and len(settled.forwarders) == 2
    for _, w in pipes:
        os.write(w, b"after the end\n")
        os.close(w)  # the forwarders (cat) see end-of-file and end
    for pid in settled.forwarders:
        os.waitpid(pid, 0)
    for show in shows:
        show.close()
    assert (tmp_path / "out").read_bytes() == b"after the end\n"
    assert (tmp_path / "err").read_bytes() == b"after the end\n"
    assert all(p.done.is_set() and not p.eof for p in pumps)

"""What the user types, passed into the program's terminal while it reads ``/dev/tty``.

Under `gpudiag run` on a terminal, the program's controlling terminal (its ``/dev/tty``)
is gpudiag's pseudo-terminal for its stdout (gpudiag.run.terminal), while its stdin stays
the user's terminal itself. A program that reads ``/dev/tty`` (``getpass.getpass``,
``read < /dev/tty`` in a wrapper, a "continue? [y/N]" asked there) would wait for ever:
nothing typed arrives in that pseudo-terminal. So while a process of the program holds
``/dev/tty`` open to read (gpudiag.run.processes tells ``readers``), or the moment the
pseudo-terminal's echo is turned off (a password prompt, before the next look at the
processes), ``Keyboard`` passes every byte typed on gpudiag's own controlling terminal
into that pseudo-terminal, as ``script`` does: the user's terminal is put in a mode
without line editing and echo (``ICANON``, ``ECHO``, ``IEXTEN`` and the input
translations off; signals, ``ISIG``, stay with gpudiag, which passes Ctrl-C on as it
does otherwise), the pseudo-terminal does the line editing and the echo the program
asked for (none for a password), and the echo reaches the screen with the program's
output (and its saved stdout.txt, as ``script`` records it). When no process reads
``/dev/tty`` any more, the user's terminal gets its own mode back; so it does when gpudiag
ends, is stopped (Ctrl-Z: ``pause``), or is not in the terminal's foreground (a
background job never reads the terminal nor sets its mode: SIGTTIN and SIGTTOU are
blocked in the relay's thread, so a read from the background fails instead of stopping
gpudiag).

Outside those moments nothing is read from the user's terminal: the program's stdin
(``input()``, a mode the program sets on fd 0) is the terminal as plainly. Hand-written
on the standard library (termios, select): the relay is the ``script`` loop of one
direction, which ptyprocess and pexpect run only on a child they start themselves.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import termios
import threading
import time
from typing import Any

TTY = "/dev/tty"
#: How often the relay looks whether it is wanted and whether gpudiag is in the foreground.
TICK_S = 0.05
_IFLAG_OFF = (termios.IGNBRK | termios.BRKINT | termios.PARMRK | termios.ISTRIP
              | termios.INLCR | termios.IGNCR | termios.ICRNL | termios.IXON)
_LFLAG_OFF = termios.ICANON | termios.ECHO | termios.ECHONL | termios.IEXTEN


def relay_mode(attrs: list[Any]) -> list[Any]:
    """The user's terminal mode while relaying: every key as it is typed, no echo, no line
    editing, no translation (the pseudo-terminal does them); signals and output as they
    were."""
    mode = list(attrs)
    mode[0] &= ~_IFLAG_OFF
    mode[3] &= ~_LFLAG_OFF
    mode[6] = list(attrs[6])
    mode[6][termios.VMIN], mode[6][termios.VTIME] = 1, 0
    return mode


class Keyboard(threading.Thread):
    """Relays gpudiag's terminal (``user_fd``) into the program's pseudo-terminal
    (``master``: its reading end) while wanted; see the module docstring."""

    def __init__(self, user_fd: int, master: int) -> None:
        super().__init__(name="gpudiag-run-keyboard", daemon=True)
        self.user_fd, self.master = user_fd, master
        self.readers = 0  # processes of the program holding /dev/tty open to read
        self.looked_at = 0.0  # when the process watch last counted them (monotonic)
        self._echo_off_at: float | None = None
        self._saved: list[Any] | None = None  # the user's own mode
        self._paused = False
        self._lock = threading.RLock()  # pause() runs in a signal handler
        self._wake_r, self._wake_w = os.pipe()
        self._ended = False

    @classmethod
    def open(cls, master: int) -> Keyboard | None:
        """gpudiag's controlling terminal as the keyboard; None where it has none."""
        try:
            fd = os.open(TTY, os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError:
            return None
        if not os.isatty(fd):
            os.close(fd)
            return None
        return cls(fd, master)

    def told(self, readers: int) -> None:
        """The process watch's count of processes reading /dev/tty, just now."""
        self.readers, self.looked_at = readers, time.monotonic()

    def wanted(self) -> bool:
        """A process reads /dev/tty, or its echo went off since the processes were counted
        (a password prompt: no key must be echoed on the user's side meanwhile)."""
        if self.readers:
            return True
        echo_off = self._pty_echo_off()
        if not echo_off:
            self._echo_off_at = None
            return False
        if self._echo_off_at is None:
            self._echo_off_at = time.monotonic()
        return self.looked_at <= self._echo_off_at

    def _pty_echo_off(self) -> bool:
        try:
            return not termios.tcgetattr(self.master)[3] & termios.ECHO
        except termios.error:
            return False

    def foreground(self) -> bool:
        try:
            return os.tcgetpgrp(self.user_fd) == os.getpgrp()
        except OSError:
            return False

    def run(self) -> None:
        with contextlib.suppress(ValueError, OSError):
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTTIN, signal.SIGTTOU})
        try:
            while not self._ended:
                relaying = self.wanted() and not self._paused and self.foreground()
                if relaying:
                    self._take()
                else:
                    self._give_back()
                watched = [self._wake_r, self.user_fd] if relaying else [self._wake_r]
                ready, _, _ = select.select(watched, [], [], TICK_S)
                if self._wake_r in ready:
                    os.read(self._wake_r, 512)
                elif self.user_fd in ready and not self._pass_on():
                    break
        except (OSError, ValueError):
            pass
        finally:
            self._give_back()

    def _pass_on(self) -> bool:
        """One read of what was typed, written whole into the pseudo-terminal; False when
        either end is gone."""
        try:
            data = os.read(self.user_fd, 4096)
        except OSError:  # EIO: read from the background (SIGTTIN blocked), or hung up
            return True
        if not data:
            return False
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.master, view):]
            except InterruptedError:
                continue
            except OSError:
                return False
        return True

    def _take(self) -> None:
        with self._lock:
            if self._saved is not None:
                return
            with contextlib.suppress(termios.error, OSError):
                saved = termios.tcgetattr(self.user_fd)
                termios.tcsetattr(self.user_fd, termios.TCSANOW, relay_mode(saved))
                self._saved = saved

    def _give_back(self) -> None:
        with self._lock:
            if self._saved is None:
                return
            saved, self._saved = self._saved, None
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.user_fd, termios.TCSANOW, saved)

    def pause(self) -> None:
        """Before gpudiag stops (Ctrl-Z): the user's mode back for the shell."""
        self._paused = True
        self._give_back()

    def resume(self) -> None:
        """After gpudiag continues: relaying again once it is in the foreground."""
        self._paused = False
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")

    def close(self) -> None:
        """Stop relaying and give the user's terminal its own mode back."""
        self._ended = True
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        if self.is_alive():
            self.join(timeout=2)
        self._give_back()
        for fd in (self._wake_r, self._wake_w, self.user_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

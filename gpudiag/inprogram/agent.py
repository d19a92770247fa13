"""The primitives every hook uses inside the program's interpreter: the Agent (one per
process: its configuration, the event recorder, exit callbacks), ``guard`` and the
process-wide ``AGENT`` that install.py sets. Imports no hook (install.py does), only the
standard library and small gpudiag modules: never TensorFlow.

Everything gpudiag does inside the program goes through :func:`guard` or
:meth:`Agent.hook_error`: an error in gpudiag's own code is recorded as a ``hook_error``
event and the program carries on.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from gpudiag.inprogram.config import RunHookConfig, stream_id
from gpudiag.inprogram.recorder import Recorder
from gpudiag.layout import (
    RUN_MARK_PLACEMENT_ASKED,
    RUN_MARK_QUIET_BEGIN,
    RUN_MARK_QUIET_END,
    RUN_MARKER,
    RUN_STDERR,
    events,
)

T = TypeVar("T")

# Environment variables recorded with each process (what they were when it started).
RECORDED_ENV = ("TF_CPP_MIN_LOG_LEVEL", "CUDA_VISIBLE_DEVICES", "TF_FORCE_GPU_ALLOW_GROWTH",
                "TF_GPU_ALLOCATOR", "TF_CONFIG", "TF_XLA_FLAGS", "NVIDIA_VISIBLE_DEVICES")
MAX_HOOK_ERRORS = 50


class Agent:
    """The hooks' state in one process."""

    def __init__(self, config: RunHookConfig) -> None:
        self.config = config
        self.recorder = Recorder(config.events_dir)
        self.exit_callbacks: list[Callable[[], None]] = []
        self.hook_errors = 0
        self.crash_recorded = False
        self.tf: ModuleType | None = None
        self.profile: Any = None  # profilewindow.ProfileWindow once TensorFlow is imported
        self.fault_file: Any = None  # faulthandler's file, kept open for the process's life
        # gpudiag itself asked TensorFlow for its placement log (a cluster task:
        # inprogram.strategies); a Session given its own ConfigProto gets it too (sessions)
        self.placement_log_asked = False
        # the stream gpudiag gave the program as fd 2 (the parent's word: a child whose fd 2
        # is a pipe of the program's own must not take it for gpudiag's)
        self.stderr_id = config.stderr_stream or stream_id(2)
        self.stdout_id = config.stdout_stream or stream_id(1)
        # TF_CPP_MIN_LOG_LEVEL as the program had it at `import tensorflow` (cpplevel.py)
        self.program_cpp_level: str | None = None
        self.cpp_log_captured = False  # TensorFlow loaded at level 0 onto gpudiag's stream
        self.stream_errors = 0
        self._stream_errors_seen: set[str] = set()

    def emit(self, event: events.Event) -> None:
        """Record one event (gpudiag.layout.events: the only way an event is written)."""
        with contextlib.suppress(Exception):  # the disk is full or gone: nothing to tell
            self.recorder.emit(event)

    def hook_error(self, where: str, exc: BaseException) -> None:
        self.hook_errors += 1
        if self.hook_errors > MAX_HOOK_ERRORS:
            return
        self.emit(events.HookError(where=where, type=type(exc).__name__, message=str(exc)[:2000],
                                   traceback="".join(traceback.format_exception(exc))[-4000:]))

    def marker(self, word: str) -> None:
        """A marker line on the program's stderr, in order with TensorFlow's C++ log; only
        while fd 2 is still the stream gpudiag gave the program (one it pointed at a file
        of its own, ``os.dup2(log, 2)``, gets nothing of gpudiag's); then a placement-asked
        marker goes to stdout while fd 1 is gpudiag's (the stdout filter reads it too). The
        program's ``sys.stderr`` (``sys.stdout``) is flushed through a guarded call: one
        without ``flush()`` (a StreamToLogger) or a closed one costs the marker nothing, the
        error is counted."""
        fd, stream = 2, "stderr"
        if not self.stderr_is_gpudiags():
            # the placement lines TensorFlow prints on stdout are told apart on stdout: the
            # program's own asking goes there when fd 2 is a file of its own
            if not word.startswith(RUN_MARK_PLACEMENT_ASKED) or \
                    not _same_stream(1, self.stdout_id):
                return
            fd, stream = 1, "stdout"
        try:
            flush = getattr(sys, stream).flush
            flush()
        except Exception as exc:  # anything the program's own stream raises
            self.stream_error(f"sys.{stream}.flush before a marker", exc)
        with contextlib.suppress(OSError):
            os.write(fd, f"{RUN_MARKER}{word}\n".encode())

    def stderr_is_gpudiags(self) -> bool:
        """Whether fd 2 is (still) the stream gpudiag gave the program."""
        return _same_stream(2, self.stderr_id)

    def stream_error(self, where: str, exc: BaseException) -> None:
        """An exception from the program's own stream: swallowed, counted, reported once
        per place (a hook_error event)."""
        self.stream_errors += 1
        if where not in self._stream_errors_seen:
            self._stream_errors_seen.add(where)
            self.hook_error(where, exc)

    def quiet(self) -> _Quiet:
        """Around gpudiag's own TensorFlow calls: the log lines they cause stay out of the
        terminal (they are saved like every other line)."""
        return _Quiet(self)

    def on_exit(self, callback: Callable[[], None]) -> None:
        self.exit_callbacks.append(callback)

    def _at_exit(self) -> None:
        for callback in list(self.exit_callbacks):
            guard(f"at exit: {getattr(callback, '__qualname__', callback)}", callback)
        self.emit(events.Exit(hook_errors=self.hook_errors, stream_errors=self.stream_errors))


class _Quiet:
    """In a notebook's kernel (no marker is read there), fd 2 itself is lent to the events
    directory's stderr file for the call: TensorFlow's C++ lines about gpudiag's own
    profiler never reach the cell's output; the kernel's fd 2 is back right after."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.saved: int | None = None

    def __enter__(self) -> None:
        self.agent.marker(RUN_MARK_QUIET_BEGIN)
        if self.agent.config.in_kernel:
            with contextlib.suppress(OSError):
                path = Path(self.agent.config.events_dir) / RUN_STDERR
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
                try:
                    self.saved = os.dup(2)
                    os.dup2(fd, 2)
                finally:
                    os.close(fd)

    def __exit__(self, *exc: Any) -> None:
        if self.saved is not None:
            with contextlib.suppress(OSError):
                os.dup2(self.saved, 2)
                os.close(self.saved)
            self.saved = None
        self.agent.marker(RUN_MARK_QUIET_END)


def _same_stream(fd: int, expected: tuple[int, int] | None) -> bool:
    return expected is not None and stream_id(fd) == expected


def above_std(fd: int) -> int:
    """``fd`` moved above 0-2 (close-on-exec), so that a file of gpudiag's never takes the
    place of a standard stream the program closed (stdin closed: the events file would
    become its fd 0)."""
    if fd > 2:
        return fd
    import fcntl

    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


_INPROGRAM = __file__.rpartition(os.sep)[0] + os.sep  # as co_filename spells it


def drop_own_frames(exc: BaseException) -> None:
    """Called by a wrapper of the program's call (``except BaseException as exc:
    drop_own_frames(exc); raise``): the traceback's leading entries in gpudiag's own code
    (the wrapper's, and any in between) are removed, so the traceback the program prints
    is the one it prints plainly (a bare ``raise`` adds no entry back)."""
    with contextlib.suppress(Exception):
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_INPROGRAM):
            tb = tb.tb_next
        if tb is not None:  # raised in gpudiag's own code: keep all of it
            exc.__traceback__ = tb


AGENT: Agent | None = None

_MISSING = object()


class _Live:
    """Whether the hooks patched since the last :func:`unpatch_all` still act: each
    gated hook holds the one current when it was installed, so that one the program kept
    (wrapped, or stored) after a watch() ended passes straight through to what it
    replaced."""

    __slots__ = ("on",)

    def __init__(self) -> None:
        self.on = True


_LIVE = _Live()
#: Every attribute a hook replaced, in order: (owner, name, what the owner itself held
#: before (or _MISSING: it inherited it, or had none), what gpudiag put there).
PATCHES: list[tuple[Any, str, Any, Any]] = []


def unwrapped(owner: Any, name: str, *, missing_ok: bool = False) -> Any:
    """What ``owner.name`` holds, for a hook to wrap; None where a hook of gpudiag's holds
    it already (installed twice: the first stays). Where it holds nothing: None with
    ``missing_ok``, else AttributeError, as reading it raises (the install's hook error)."""
    original = getattr(owner, name, None) if missing_ok else getattr(owner, name)
    return None if original is None or hasattr(original, "__gpudiag_wrapped__") else original


def wrap_once(owner: Any, name: str, make: Callable[[Any], Any], *,
              missing_ok: bool = False) -> None:
    """Put ``make(original)`` at ``owner.name`` (:func:`patch`), where :func:`unwrapped`
    finds something there that no hook of gpudiag's wraps yet."""
    original = unwrapped(owner, name, missing_ok=missing_ok)
    if original is not None:
        patch(owner, name, make(original), wraps=original)


def patch(owner: Any, name: str, value: Any, *, wraps: Any = None) -> None:
    """Put ``value`` at ``owner.name`` (a module's function, a class's method, an object's
    attribute), recorded so that :func:`unpatch_all` can put back what was there.
    Every hook replaces what it wraps through this (``wraps``: what it calls, marked on
    it as ``__gpudiag_wrapped__`` so that :func:`unwrapped` knows it). A function (or a
    staticmethod's) is put there gated (:func:`_gated`): once unpatch_all has run, it
    calls what it replaced, whoever still holds it."""
    if wraps is not None:
        value.__gpudiag_wrapped__ = wraps
    try:
        before = vars(owner).get(name, _MISSING)
    except TypeError:  # no __dict__ (slots): what it answers now
        before = getattr(owner, name, _MISSING)
    value = _gated(owner, name, value)
    setattr(owner, name, value)
    PATCHES.append((owner, name, before, value))


def _replaced(owner: Any, name: str) -> Any:
    """What a hook at ``owner.name`` passes to once inert: a class's own attribute as
    stored (a function, unbound), else what the owner answers now (a module's function,
    an object's bound method)."""
    if isinstance(owner, type):
        import inspect

        raw = inspect.getattr_static(owner, name, _MISSING)
        return raw.__func__ if isinstance(raw, staticmethod) else raw
    return getattr(owner, name, _MISSING)


def _gated(owner: Any, name: str, value: Any) -> Any:
    """``value`` (a function, or a staticmethod of one) that calls itself while the
    hooks live, else what it replaced; anything else as it is."""
    inner = value.__func__ if isinstance(value, staticmethod) else value
    original = _replaced(owner, name)
    if not isinstance(inner, types.FunctionType) or not callable(original):
        return value
    gate = _gate(inner, original, _LIVE)
    return staticmethod(gate) if isinstance(value, staticmethod) else gate


def _gate(inner: Callable[..., Any], original: Callable[..., Any], live: _Live
          ) -> Callable[..., Any]:
    @functools.wraps(inner)
    def gate(*args: Any, **kwargs: Any) -> Any:
        try:
            if live.on:
                return inner(*args, **kwargs)
            return original(*args, **kwargs)
        except BaseException as exc:  # the program's traceback without this frame
            drop_own_frames(exc)
            raise
    return gate


_GATE_CODE = next(c for c in _gate.__code__.co_consts
                  if isinstance(c, types.CodeType) and c.co_name == "gate")


def is_gate(code: types.CodeType) -> bool:
    """Whether ``code`` is the gate :func:`patch` puts around every hook (a frame of
    gpudiag's own between the program and what it called)."""
    return code is _GATE_CODE


def caller_frame(depth: int) -> Any:
    """``sys._getframe(depth)`` as the function calling this one would get it, with the
    gates :func:`patch` puts around every hook passed over: a hook's ``caller_frame(1)``
    is the program's frame that called the patched function."""
    frame: Any = sys._getframe(depth + 1)
    while frame is not None and frame.f_code is _GATE_CODE:
        frame = frame.f_back
    return frame


def unpatch_all() -> list[str]:
    """Undo every :func:`patch`, last first (gpudiag.notebook's watch() at its end). An
    attribute the program replaced again after gpudiag is left as the program made it;
    returned: those, by name (``Model.fit``). Every hook patched so far becomes inert,
    whoever still holds it (:func:`patch`)."""
    global _LIVE
    _LIVE.on = False
    _LIVE = _Live()
    left: list[str] = []
    while PATCHES:
        owner, name, before, value = PATCHES.pop()
        try:
            current = vars(owner).get(name, _MISSING)
        except TypeError:
            current = getattr(owner, name, _MISSING)
        try:
            if current is value:
                if before is _MISSING:
                    delattr(owner, name)
                else:
                    setattr(owner, name, before)
            elif current is not before:  # the program's own replacement since: its
                left.append(f"{getattr(owner, '__name__', type(owner).__name__)}.{name}")
        except Exception:  # a read-only owner: said, never raised
            left.append(f"{getattr(owner, '__name__', type(owner).__name__)}.{name}")
    return left


def guard(where: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T | None:
    """Call gpudiag code; an exception becomes a hook_error event, never the program's."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if AGENT is not None:
            AGENT.hook_error(where, exc)
        return None

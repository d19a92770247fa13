"""The program's crash: an uncaught exception (main thread or another), or a fatal signal.

``sys.excepthook`` and ``threading.excepthook`` are wrapped (the previous hook still runs,
so the user sees the same traceback); should the program replace them, the exit handler
still finds the exception in ``sys.last_exc`` / ``sys.last_value``. A fatal signal
(SIGSEGV, SIGABRT ...) in a process that imported TensorFlow leaves faulthandler's
Python stack in children/program/faults-<pid>.txt (unless the program enabled
faulthandler itself).
"""

from __future__ import annotations

import faulthandler
import os
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import above_std, patch
from gpudiag.inprogram.usercode import frames, user_frame
from gpudiag.layout import events, run_faults_name

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

MAX_MESSAGE_CHARS = 4000


def record(agent: Agent, exc_type: type[BaseException], exc: BaseException,
           tb: TracebackType | None, thread: str) -> None:
    if agent.crash_recorded or issubclass(exc_type, SystemExit):
        return
    agent.crash_recorded = True
    frame_list = frames(tb)
    chain: list[dict[str, str]] = []
    cause = exc.__cause__ or exc.__context__
    while cause is not None and len(chain) < 3:
        chain.append({"type": type(cause).__name__, "message": str(cause)[:MAX_MESSAGE_CHARS]})
        cause = cause.__cause__ or cause.__context__
    agent.emit(events.Crash(type=exc_type.__name__,
               module=getattr(exc_type, "__module__", ""),
               message=str(exc)[:MAX_MESSAGE_CHARS], thread=thread, frames=frame_list,
               user_frame=user_frame(frame_list), causes=chain))


def install(agent: Agent) -> None:
    previous = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException,
                   tb: TracebackType | None) -> None:
        try:
            record(agent, exc_type, exc, tb, "MainThread")
        except Exception as err:
            agent.hook_error("excepthook", err)
        previous(exc_type, exc, tb)

    patch(sys, "excepthook", excepthook)
    previous_thread = threading.excepthook

    def thread_hook(args: Any) -> None:
        try:
            if args.exc_type is not None and args.exc_value is not None:
                name = args.thread.name if args.thread is not None else "thread"
                record(agent, args.exc_type, args.exc_value, args.exc_traceback, name)
        except Exception as err:
            agent.hook_error("threading.excepthook", err)
        previous_thread(args)

    patch(threading, "excepthook", thread_hook)
    if not agent.config.in_kernel:  # a kernel's sys.last_value is an earlier cell's error
        agent.on_exit(lambda: _last_exception(agent))


def _last_exception(agent: Agent) -> None:
    """The exit handler's fallback, for a program that replaced sys.excepthook."""
    exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
    if exc is not None and not agent.crash_recorded:
        record(agent, type(exc), exc, exc.__traceback__, "MainThread")


def enable_faulthandler(agent: Agent) -> None:
    """Python's stack on a fatal signal, into faults-<pid>.txt (processes with TF only)."""
    if faulthandler.is_enabled():
        return
    path = Path(agent.config.events_dir) / run_faults_name(os.getpid())
    fd = above_std(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644))
    handle = os.fdopen(fd, "w", encoding="utf-8")  # faulthandler keeps it open
    faulthandler.enable(file=handle, all_threads=True)
    agent.fault_file = handle

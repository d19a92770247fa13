"""``gpudiag.watch()``: `gpudiag run`'s diagnosis of the training a notebook cell runs, in
the kernel's own process (docs/notebook.md).

    with gpudiag.watch():
        model.fit(dataset, epochs=3)

On entry, a run directory (the same kind `gpudiag run` writes: command ``run``) and the
same in-program hooks, installed in this process by gpudiag.inprogram.install.install_here
with the configuration `run` gives its program's (gpudiag.inprogram.config), except what a
kernel cannot have: TensorFlow's C++ log is the kernel's own (never read, never lent
another level: the placement window gives the placement instead), no marker line is
written. On exit, whatever the block did (returned, raised, was
interrupted): every hook removed (gpudiag.inprogram.install.uninstall: patched functions
back, the import hook off ``sys.meta_path``, gpudiag's threads ended), then the events
analysed by `run`'s own code (gpudiag.run.analyse.report) plus run.notebook (what the
block could not see, gpudiag.verdicts.run.notebook), and the result shown
(gpudiag.notebook.display.Diagnosis). The block's exception passes through unchanged;
gpudiag's own failure is one line on stderr, never an exception in the notebook.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

from gpudiag.inprogram.config import (
    DEFAULT_PROFILE_STEPS,
    DEFAULT_PROFILE_WARMUP_STEPS,
    RunHookConfig,
)

DEFAULT_LOGDIR = "runs"
#: The (st_dev, st_ino) the hooks take for their stream: none is, so no marker line is
#: ever written to the kernel's stderr (gpudiag.inprogram.agent.Agent.marker).
NO_STREAM = (-1, -1)


class Watch:
    """The context manager :func:`watch` returns. After the block: ``result`` (the
    Diagnosis, None when gpudiag could not diagnose: ``error`` says why) and ``run_dir``."""

    def __init__(self, logdir: str | Path = DEFAULT_LOGDIR, *,
                 profile_warmup_steps: int = DEFAULT_PROFILE_WARMUP_STEPS,
                 profile_steps: int = DEFAULT_PROFILE_STEPS, show: bool = True,
                 label: str = "gpudiag.watch") -> None:
        # checked on entry (_checked): a bad value is one line there, the block unwatched
        self.logdir: Any = logdir
        self.profile_warmup_steps = profile_warmup_steps
        self.profile_steps = profile_steps
        self.show = show
        self.label = label
        self.result: Any = None  # gpudiag.notebook.display.Diagnosis
        self.error: str | None = None
        self.run_dir: Path | None = None
        self.block_error: BaseException | None = None  # %%gpudiag: the cell's exception
        self.cell_names: dict[str, int] = {}  # %%gpudiag: its body's file -> the cell's In[N]
        self._session: Any = None
        self._state: Any = None
        self._sampler: Any = None
        self._backend: Any = None
        self._nvml_reason: str | None = None
        self._imported_before: tuple[str, ...] = ()
        self._t0 = 0.0

    def __enter__(self) -> Watch:
        try:
            self._start()
        except Exception as exc:  # gpudiag's, never the cell's: the block runs unwatched
            self._abandon(exc)
        except BaseException:  # Ctrl-C while entering: nothing left installed, run ended
            self._interrupted()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        from gpudiag.notebook.kernelstate import warnings_kept

        if self._state is not None:
            with warnings_kept():
                try:
                    self._finish(exc or self.block_error)
                except Exception as err:
                    self._abandon(err)
                except BaseException:  # Ctrl-C during the analysis: the run ended as such
                    self._interrupted()
                    raise
        # None: the block's exception, if any, goes on as the notebook's, as plainly

    def _interrupted(self) -> None:
        """A KeyboardInterrupt (or SystemExit) inside gpudiag's own entry or exit: the hooks
        out and the run finished as interrupted, with a second Ctrl-C held until then."""
        with _interrupts_held():
            self._abandon(KeyboardInterrupt("interrupted"), interrupted=True)

    # ------------------------------------------------------------------ the two ends

    def _start(self) -> None:
        from gpudiag.inprogram import install
        from gpudiag.layout import RUN_CHILD_NAME, RUN_STDERR, RUN_STDOUT, child_dir
        from gpudiag.session import RunSession

        self._t0 = time.monotonic()
        self._imported_before = tuple(n for n in install.WATCHED if n in sys.modules)
        self.logdir = _checked(self.logdir, self.profile_warmup_steps, self.profile_steps)
        self._session = RunSession("run", self.logdir)
        self.run_dir = self._session.run_dir
        out_dir = child_dir(self.run_dir, RUN_CHILD_NAME)
        for name in (RUN_STDOUT, RUN_STDERR):  # the cell's output stays the notebook's
            (out_dir / name).touch()
        config = RunHookConfig(
            events_dir=str(out_dir.absolute()), run_dir=str(self.run_dir.absolute()),
            profile_warmup_steps=self.profile_warmup_steps, profile_steps=self.profile_steps,
            placement_log=True, stderr_stream=NO_STREAM, in_kernel=True)
        self._start_nvml()
        with _interrupts_held():  # all of the hooks in, or none
            self._state = install.install_here(config)

    def _start_nvml(self) -> None:
        from gpudiag import nvml

        backend = nvml.open_backend()
        if isinstance(backend, nvml.NvmlUnavailable):
            self._nvml_reason = backend.reason
            return
        self._backend = backend
        sampler = nvml.Sampler(backend, nvml.DEFAULT_INTERVAL_S, None,
                               active_threshold_percent=nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT)
        try:
            sampler.start()
        except nvml.DeviceError as exc:
            self._nvml_reason = f"NVML failed at start: {exc}"
            return
        self._sampler = sampler

    def _finish(self, exc: BaseException | None) -> None:
        from gpudiag.inprogram import crash, install
        from gpudiag.inprogram.agent import guard
        from gpudiag.layout import RUN_CHILD_NAME, RUN_STDERR, RUN_STDOUT, child_path
        from gpudiag.notebook import display
        from gpudiag.run import analyse, eventfiles, streams
        from gpudiag.run.options import Outcome, RunOptions
        from gpudiag.verdicts.run import notebook

        run_dir = self._session.run_dir
        interrupt = exc if isinstance(exc, KeyboardInterrupt) else None
        with _interrupts_held():  # all of the hooks out, or none
            state, self._state = self._state, None
            if exc is not None and interrupt is None:  # the cell raised: run.crash says where
                guard("recording the block's exception", crash.record, state.agent, type(exc),
                      exc, exc.__traceback__, "MainThread")
            not_restored = install.uninstall(state)
        duration = time.monotonic() - self._t0
        sampling = self._stop_nvml()
        out_dir = child_path(run_dir, RUN_CHILD_NAME)
        returncode = 0 if exc is None else -signal.SIGINT if interrupt else 1
        outcome = Outcome(returncode, duration, interrupt, sampling, self._nvml_reason,
                          streams.FilterState(user_level=streams.user_level(
                              os.environ.get("TF_CPP_MIN_LOG_LEVEL"))),
                          out_dir / RUN_STDOUT, out_dir / RUN_STDERR, out_dir,
                          program_pid=os.getpid())
        options = RunOptions(profile_warmup_steps=self.profile_warmup_steps,
                             profile_steps=self.profile_steps, quiet=True, in_kernel=True)
        session = self._session
        assert session is not None
        analyse.report(session, [self.label], outcome, options, python=True)
        observed = [o for o in eventfiles.observe_all(out_dir)[0] if o.imported_tf]
        session.add(notebook.notebook(notebook.KernelSeen(
            imported_before=self._imported_before,
            initialized_before=any(o.tf_initialized_at_import for o in observed)
            if "tensorflow" in self._imported_before else None,
            loops=sum(len(o.series) for o in observed),
            dataset_calls=sum(len(o.dataset_calls) for o in observed),
            not_restored=tuple(not_restored))))
        cells = {**display.cell_numbers(), **self.cell_names}
        session.set("notebook", {"label": self.label, "cells": cells})
        session.close(interrupted=interrupt is not None,
                      signal_name="SIGINT" if interrupt is not None else None)
        self.result = display.Diagnosis.load(run_dir, cells)
        if self.show:
            display.show(self.result)

    def _stop_nvml(self) -> Any:
        result = None
        if self._sampler is not None:
            result = self._sampler.stop()
        if self._backend is not None:
            with contextlib.suppress(Exception):
                self._backend.close()
        return result

    def _abandon(self, exc: BaseException, *, interrupted: bool = False) -> None:
        """gpudiag could not watch or diagnose: hooks off, one line said, nothing raised
        (``interrupted``: Ctrl-C did it; the run is finished as interrupted)."""
        from gpudiag.errors import GpudiagError
        from gpudiag.inprogram import install

        state, self._state = self._state, None
        if state is not None:
            with contextlib.suppress(Exception):
                install.uninstall(state)
        with contextlib.suppress(Exception):
            self._stop_nvml()
        session, self._session = self._session, None
        if session is not None and session.report.finished_at is None:  # not left partial
            with contextlib.suppress(Exception):
                session.close(interrupted=interrupted, complete=False,
                              signal_name="SIGINT" if interrupted else None)
        if interrupted:
            self.error = "interrupted (Ctrl-C) while gpudiag entered or left the block"
            return
        text = exc.message if isinstance(exc, GpudiagError) else f"{type(exc).__name__}: {exc}"
        self.error = text
        with contextlib.suppress(Exception):
            print(f"gpudiag: no diagnosis of this cell: {text}", file=sys.stderr)


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """In the main thread: a SIGINT (the kernel's interrupt) that arrives inside is held
    and raised as KeyboardInterrupt when it ends, so that what is inside (hooks going in
    or out, the run closed) is done whole; elsewhere, or with a handler of the program's
    own that is not Python's default, nothing is changed."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        yield
        return
    held: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if held:
        raise KeyboardInterrupt


def _checked(logdir: Any, warmup: Any, steps: Any) -> Path:
    """watch()'s arguments as it uses them; UsageError (one line on stderr, the block
    unwatched) for a logdir that is not a path of text, or a step count that is not a
    whole number >= 0."""
    from gpudiag.errors import UsageError

    text = logdir if isinstance(logdir, str) else None
    if isinstance(logdir, os.PathLike):
        with contextlib.suppress(Exception):
            text = os.fspath(logdir)
    if not isinstance(text, str) or not text:
        raise UsageError(f"logdir must be a path (a non-empty str or os.PathLike giving "
                         f"one), not {type(logdir).__name__}")
    for name, value in (("profile_warmup_steps", warmup), ("profile_steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UsageError(f"{name} must be a whole number >= 0, not {value!r:.40}")
    return Path(text)


def watch(logdir: str | Path = DEFAULT_LOGDIR, *,
          profile_warmup_steps: int = DEFAULT_PROFILE_WARMUP_STEPS,
          profile_steps: int = DEFAULT_PROFILE_STEPS, show: bool = True) -> Watch:
    """Diagnose the training the ``with`` block runs, in this process (a notebook's kernel):
    the same hooks, findings and run directory as `gpudiag run`, shown after the block
    (``show=False``: only kept in ``.result``).

    ``logdir``: where the run directory goes (as `gpudiag run --logdir`);
    ``profile_warmup_steps`` / ``profile_steps``: the profiled window (``--profile-warmup``,
    ``--profile-steps``). What ran before the block (TensorFlow's import and device set-up,
    a dataset built in an earlier cell) cannot be seen: the run.notebook finding says
    which. The block's own exception passes through unchanged."""
    return Watch(logdir, profile_warmup_steps=profile_warmup_steps,
                 profile_steps=profile_steps, show=show)

"""The typed records that pass between run's steps: the options the command line gave
(RunOptions) and what the parent saw of the program (Outcome). A leaf: command.py builds
them, analyse.py reads them."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from gpudiag import nvml
from gpudiag.errors import WriteFailed, signum_of
from gpudiag.inprogram.config import DEFAULT_PROFILE_STEPS, DEFAULT_PROFILE_WARMUP_STEPS
from gpudiag.procs.command import DEFAULT_GRACE_S
from gpudiag.records.trial import TrialFix
from gpudiag.run import streams, survivors

if TYPE_CHECKING:
    from gpudiag.run.live import LiveState


@dataclass(frozen=True)
class RunOptions:
    interval_s: float = nvml.DEFAULT_INTERVAL_S
    idle_threshold_percent: float = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT
    gpus: tuple[int, ...] | None = None
    profile_warmup_steps: int = DEFAULT_PROFILE_WARMUP_STEPS
    profile_steps: int = DEFAULT_PROFILE_STEPS
    placement_log: bool = True
    stall_timeout_s: float | None = None  # None: from the step period (inprogram.stallwatch)
    quiet: bool = False  # no status line on the terminal (gpudiag.run.statusline)
    grace_s: float = DEFAULT_GRACE_S  # after a signal passed on, before SIGKILL (--grace)
    in_kernel: bool = False  # the hooks ran in a notebook's kernel (gpudiag.notebook)
    # `gpudiag try`'s trial: the fixes the hooks apply, the fit's steps before it stops
    # (or the calls of the custom loop's step tf.function, stop_function, after which the
    # process ends), and whether the program's output reaches the terminal (it is saved
    # either way)
    trial_fixes: tuple[TrialFix, ...] = ()
    stop_after_steps: int | None = None
    stop_function: str | None = None
    echo: bool = True
    # `gpudiag try`'s trial: ended (SIGTERM, --grace, SIGKILL) once it runs this long, a
    # hang where the program as written ended (None: no limit, as `gpudiag run` has)
    time_limit_s: float | None = None


class Finish:
    """When the program exited (``exited_unix_s``) and how long after it each part of
    gpudiag's own end took, in seconds (``parts``, in order): the report's ``run.finish``."""

    def __init__(self, exited_unix_s: float, exited_monotonic: float) -> None:
        self.exited_unix_s = exited_unix_s
        self.exited_monotonic = exited_monotonic
        self.parts: dict[str, float] = {}

    def mark(self, part: str) -> None:
        self.parts[part] = round(time.monotonic() - self.exited_monotonic, 3)

    def to_dict(self) -> dict[str, object]:
        return {"program_exited_unix_s": round(self.exited_unix_s, 3), **self.parts}


@dataclass
class Outcome:
    """What the parent saw of the program."""

    returncode: int | None
    duration_s: float
    interrupt: KeyboardInterrupt | None  # Ctrl-C, SIGTERM or SIGHUP that stopped it
    sampling: nvml.SamplingResult | None
    nvml_reason: str | None
    state: streams.FilterState
    stdout_path: Path
    stderr_path: Path
    events_dir: Path
    save_failures: tuple[WriteFailed, ...] = ()  # the saved output that could not be written
    kept_free: tuple[str, ...] = ()  # saved copies stopped at the disk reserve (why, each)
    settled: survivors.Settled = field(default_factory=survivors.Settled)  # outlived it
    live: LiveState | None = None  # what was shown while it ran (run.live)
    finish: Finish | None = None  # when the program exited, and what gpudiag did after
    program_pid: int | None = None  # the program's own pid (the child of its group's holder)
    time_limited_s: float | None = None  # the time limit that ended it (None: it ended)

    @property
    def interrupted(self) -> bool:
        return self.interrupt is not None

    @property
    def interrupt_signal(self) -> str:
        """The signal that interrupted the run (SIGINT: Ctrl-C)."""
        return signal.Signals(signum_of(self.interrupt) if self.interrupt else
                              signal.SIGINT).name

"""The hooks' configuration: what the parent tells the program's interpreter.

Passed as JSON in the environment variable layout.ENV_RUN_CONFIG, so every Python process
the program starts (a launcher's workers included) inherits it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass

from gpudiag.layout import ENV_RUN_CONFIG
from gpudiag.records.trial import TrialFix

DEFAULT_PROFILE_WARMUP_STEPS = 10
DEFAULT_PROFILE_STEPS = 5
# Step records are buffered and appended at most this often (a SIGKILL loses at most
# this much of the per-step timing; everything else is appended when it happens).
DEFAULT_FLUSH_INTERVAL_S = 1.0
# The first calls of every step source are appended one by one, without buffering.
UNBUFFERED_FIRST_STEPS = 10
# A custom loop's returned loss is read (a device-to-host copy) at most this many times a
# second; calls in between keep only their timing.
DEFAULT_LOSS_READS_PER_S = 20


@dataclass(frozen=True)
class RunHookConfig:
    events_dir: str  # children/program/ of the run directory
    run_dir: str  # the run directory (TensorBoard runs and traces go under it)
    profile_warmup_steps: int = DEFAULT_PROFILE_WARMUP_STEPS
    profile_steps: int = DEFAULT_PROFILE_STEPS  # 0: no profiler window
    placement_log: bool = True  # enable TF's placement log right after `import tensorflow`
    # (st_dev, st_ino) of the stream gpudiag gave the program as fd 2 (None: unknown):
    # markers and the full C++ log go only there, never to a file or pipe of the program's
    stderr_stream: tuple[int, int] | None = None
    # the same of fd 1: where a placement-asked marker goes when fd 2 is no longer gpudiag's
    # (the program closed it and opened a file there): the placement lines TensorFlow
    # prints on stdout then reach the terminal as plainly
    stdout_stream: tuple[int, int] | None = None
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    loss_reads_per_s: int = DEFAULT_LOSS_READS_PER_S
    # no step finished for this long: a stall (None: derived from the step period, with a
    # floor, gpudiag.inprogram.stallwatch; 0: not watched)
    stall_timeout_s: float | None = None
    # the hooks run inside a notebook's kernel (gpudiag.notebook's watch()): TensorFlow's
    # C++ log is the kernel's (never read), the placement window opens all the same
    in_kernel: bool = False
    # `gpudiag try`'s trial: the fixes applied in-process, and the fit steps after which
    # training stops at a step boundary (None: it runs to its end); a custom loop: the
    # qualname of its step tf.function, after whose stop_after_steps-th call the process
    # ends (SystemExit(0): the program's finally blocks and exit handlers run)
    trial_fixes: tuple[TrialFix, ...] = ()
    stop_after_steps: int | None = None
    stop_function: str | None = None

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_env(environ: dict[str, str] | os._Environ[str] | None = None) -> RunHookConfig | None:
        text = (os.environ if environ is None else environ).get(ENV_RUN_CONFIG)
        if not text:
            return None
        data = json.loads(text)
        for name in ("stderr_stream", "stdout_stream"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        data["trial_fixes"] = tuple(TrialFix(**f) for f in data.get("trial_fixes") or ())
        return RunHookConfig(**data)


def stream_id(fd: int) -> tuple[int, int] | None:
    """What RunHookConfig's stderr_stream and stdout_stream hold: the (device, inode) of the
    file open at ``fd`` (None: ``fd`` is not open)."""
    try:
        st = os.fstat(fd)
    except OSError:
        return None
    return st.st_dev, st.st_ino

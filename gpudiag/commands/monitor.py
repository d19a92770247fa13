"""`gpudiag monitor -- CMD ...`: run any command while NVML samples every GPU.

The command (a user's training script, any framework) runs as a child of this process
with this process's stdin, stdout and stderr (with ``--json``, its stdout goes to stderr so
stdout stays report.json), in the same process group, so Ctrl-C in a terminal reaches it
directly. Its exit code becomes gpudiag's. The sampler (gpudiag.nvml.Sampler) runs in this
process from before the command starts until after it ends, so a crash of the command
does not lose the samples.

Imports no TensorFlow (nor does anything it uses): monitor starts at once and runs where
TensorFlow is absent.

Writes: report.json/report.md with findings ``monitor.command``, ``monitor.nvml`` and
``monitor.every-gpu-used``; per-GPU scalars in the ``nvml/`` TensorBoard run
(gpudiag.nvml.write_scalars); a per-GPU table as TensorBoard text (``gpudiag/monitor``).

Ctrl-C: the child gets the terminal's SIGINT itself; if it has not exited half a second
later, gpudiag forwards SIGINT, then SIGTERM after 5 s, then SIGKILL after 5 s more. The
report is then written with what was sampled and marked interrupted (exit code 130).
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpudiag import nvml, verdicts
from gpudiag.errors import UsageError
from gpudiag.layout import NVML_TB_RUN
from gpudiag.report import Finding
from gpudiag.session import RunSession
from gpudiag.tb import markdown_table

TAG_MONITOR = "gpudiag/monitor"

#: How the CLI opens NVML: the real backend. Tests put a scripted fake backend here
#: (tests/fake_nvml.py), the one seam through which a fake enters the CLI.
open_nvml: Callable[[], nvml.NvmlBackend | nvml.NvmlUnavailable] = nvml.open_backend
DEFAULT_IDLE_THRESHOLD_PERCENT = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT

# (signal to send, seconds to wait for the child after it); None: only wait, since the
# terminal's Ctrl-C already reached the child.
_STOP_SEQUENCE: tuple[tuple[signal.Signals | None, float], ...] = (
    (None, 0.5),
    (signal.SIGINT, 5.0),
    (signal.SIGTERM, 5.0),
    (signal.SIGKILL, 5.0),
)


def resolve_command(command: Sequence[str], name: str = "monitor") -> list[str]:
    """The command to run, checked: UsageError when there is none or it cannot be found."""
    if not command:
        raise UsageError(
            f"{name} needs a command to run: gpudiag {name} [OPTIONS] -- CMD [ARGS]..."
        )
    program = command[0]
    if shutil.which(program) is None:
        path = Path(program)
        if os.sep in program and path.is_file():
            raise UsageError(f"command is not executable: {program}")
        if os.sep in program and path.is_dir():
            raise UsageError(f"command is a directory: {program}")
        raise UsageError(f"command not found: {program}")
    return list(command)


def parse_gpus(text: str) -> tuple[int, ...]:
    """``--gpus 0,2`` -> (0, 2): NVML device indices, as nvidia-smi numbers them."""
    out: list[int] = []
    for part in text.split(","):
        token = part.strip()
        if not token.isdigit():
            raise UsageError(
                f"--gpus {text!r}: expected GPU indices separated by commas, such as 0,1"
            )
        if int(token) not in out:
            out.append(int(token))
    return tuple(out)


def check_gpus(
    gpus: Sequence[int] | None, backend: nvml.NvmlBackend | nvml.NvmlUnavailable
) -> None:
    """UsageError when ``--gpus`` names a GPU NVML does not have (unchecked without NVML)."""
    if gpus is None or isinstance(backend, nvml.NvmlUnavailable):
        return
    try:
        count = backend.device_count()
    except nvml.DeviceError:
        return  # NVML is failing as a whole: run() reports it, --gpus cannot be checked
    bad = [i for i in gpus if i >= count]
    if bad:
        listing = "0" if count == 1 else f"0..{count - 1}"
        raise UsageError(f"--gpus {bad[0]}: there are {count} GPU(s) (indices {listing})")


def stop_child(proc: subprocess.Popen[bytes]) -> None:
    """After Ctrl-C: give the child its own SIGINT, then SIGINT, SIGTERM, SIGKILL."""
    for sig, wait_s in _STOP_SEQUENCE:
        if proc.poll() is not None:
            return
        if sig is not None:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C: no more patience
            proc.kill()
            proc.wait()
            return


def exit_code_of(returncode: int) -> int:
    """A shell's convention: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def _describe(returncode: int | None) -> str:
    if returncode is None:
        return "did not finish"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"


def command_finding(argv: list[str], returncode: int | None, duration_s: float,
                    interrupted: bool) -> Finding:
    shown = " ".join(shlex.join(argv).split())  # one line, even for `python -c` programs
    if len(shown) > 80:
        shown = shown[:77] + "..."
    evidence: dict[str, Any] = {"command": argv, "returncode": returncode,
                                "duration_s": round(duration_s, 3), "interrupted": interrupted}
    if interrupted:
        return Finding("monitor.command", "warn",
                       f"interrupted (Ctrl-C) after {duration_s:.1f} s; the command "
                       f"{_describe(returncode)}", evidence,
                       advice="The findings cover only the time before the interruption.")
    if returncode == 0:
        return Finding("monitor.command", "ok",
                       f"`{shown}` exited with code 0 after {duration_s:.1f} s", evidence)
    return Finding("monitor.command", "fail",
                   f"`{shown}` {_describe(returncode)} after {duration_s:.1f} s", evidence,
                   advice="Its own output (passed through above) says why; gpudiag exits "
                          "with the same code.")


def _device_rows(result: nvml.SamplingResult) -> list[list[Any]]:
    rows = []
    for s in result.summaries:
        n = verdicts.gpu_numbers(s)
        rows.append([s.index, n["name"] or "?", n["pci_bus_id"] or "?", n["util_mean_percent"],
                     n["util_p95_percent"], n["util_max_percent"], n["active_s"],
                     None if n["peak_memory_used_bytes"] is None
                     else round(n["peak_memory_used_bytes"] / 2**20),
                     ", ".join(str(p) for p in n["processes"]), s.error or ""])
    return rows


def _write_sampling(session: RunSession, result: nvml.SamplingResult) -> None:
    tags = nvml.write_scalars(result, session.run_dir / NVML_TB_RUN)
    session.text(TAG_MONITOR, markdown_table(
        ["gpu", "name", "pci bus id", "util mean %", "util p95 %", "util max %", "active s",
         "peak memory MiB", "pids", "error"], _device_rows(result)))
    session.set("nvml_tensorboard", {"run": NVML_TB_RUN, "tags": tags})


def run(
    session: RunSession,
    command: list[str],
    *,
    backend: nvml.NvmlBackend | nvml.NvmlUnavailable,
    interval_s: float = nvml.DEFAULT_INTERVAL_S,
    idle_threshold_percent: float = DEFAULT_IDLE_THRESHOLD_PERCENT,
    gpus: Sequence[int] | None = None,
    stdout_to_stderr: bool = False,
    announce: Any = None,
) -> int | None:
    """Run ``command`` while sampling; add the findings. Returns the exit code to forward
    (None when the command exited 0: the findings decide). KeyboardInterrupt propagates
    after the child is stopped and the findings are written."""
    say = announce or (lambda _msg: None)
    sampler: nvml.Sampler | None = None
    description = None if isinstance(backend, nvml.NvmlUnavailable) else backend.description
    if not isinstance(backend, nvml.NvmlUnavailable):
        sampler = nvml.Sampler(backend, interval_s, gpus,
                               active_threshold_percent=idle_threshold_percent)
        try:
            sampler.start()
        except nvml.DeviceError as exc:  # NVML itself failed (not one device): no sampling
            backend.close()
            backend, sampler = nvml.NvmlUnavailable(f"NVML failed at start: {exc}"), None
    reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    session.set("environment", {"nvml_backend": description,
                                "nvml_unavailable_reason": reason})
    if sampler is None:
        session.set("devices", {"summary": f"NVML not available ({reason}); GPU checks skipped"})
        session.add(verdicts.nvml_sampling(None, reason, interval_s, None,
                                           check_id="monitor.nvml"))
        say(f"NVML not available ({reason}): running the command without GPU sampling")
    else:
        say(f"sampling {len(sampler.device_indices)} GPU(s) every {interval_s:g} s "
            f"({description})")

    interrupted = False
    returncode: int | None = None
    start = time.monotonic()
    try:
        try:
            proc = subprocess.Popen(command, stdout=sys.stderr if stdout_to_stderr else None)
        except OSError as exc:
            raise UsageError(f"cannot run {command[0]}: {exc.strerror}") from exc
        try:
            returncode = proc.wait()
        except KeyboardInterrupt:
            interrupted = True
            stop_child(proc)
            returncode = proc.returncode
    finally:
        duration = time.monotonic() - start
        result = sampler.stop() if sampler is not None else None
        session.set("monitor", {
            "command": command, "returncode": returncode, "duration_s": round(duration, 3),
            "interval_s": interval_s, "idle_threshold_percent": idle_threshold_percent,
            "gpus": None if gpus is None else list(gpus), "interrupted": interrupted,
            "sampling": None if result is None else result.to_dict(),
        })
        if returncode is not None or interrupted:
            session.add(command_finding(command, returncode, duration, interrupted))
        if result is not None:
            session.set("devices", {
                "summary": ", ".join(s.label for s in result.summaries) + " (NVML)",
                "nvml_devices": [verdicts.gpu_numbers(s) for s in result.summaries],
            })
            session.add(verdicts.nvml_sampling(result.backend, None, interval_s, result,
                                               check_id="monitor.nvml"))
            _write_sampling(session, result)
        session.add(verdicts.every_gpu_used(
            result.summaries if result else [], idle_threshold_percent,
            nvml_unavailable_reason=reason, expected_indices=gpus,
            check_id="monitor.every-gpu-used"))
        if not isinstance(backend, nvml.NvmlUnavailable):
            backend.close()
    if interrupted:
        raise KeyboardInterrupt
    return exit_code_of(returncode) if returncode else None

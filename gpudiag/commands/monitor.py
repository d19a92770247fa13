"""`gpudiag monitor -- CMD ...`: run any command while NVML samples every GPU.

The command (a user's training script, any framework) runs as a child of this process
with this process's stdin, stdout and stderr (with ``--json``, its stdout goes to stderr so
stdout stays report.json), as the leader of a process group of its own
(gpudiag.procs), so that it and everything it starts end with gpudiag however gpudiag
ends. Its exit code becomes gpudiag's. The sampler (gpudiag.nvml.Sampler) runs in this
process from before the command starts until after it ends, so a crash of the command
does not lose the samples.

Imports no TensorFlow (nor does anything it uses): monitor starts at once and runs where
TensorFlow is absent.

Writes: report.json/report.md with findings ``monitor.command``, ``monitor.nvml`` and
``monitor.every-gpu-used``; per-GPU scalars in the ``nvml/`` TensorBoard run
(gpudiag.nvml.write_scalars); a per-GPU table as TensorBoard text (``gpudiag/monitor``).

NVML comes in as ``backend``, opened before and closed after by the caller (the CLI,
with gpudiag.nvml.opened); this module never opens or closes it.

Ctrl-C, SIGTERM, SIGHUP: gpudiag passes the same signal on to the command's process
group, then SIGTERM after 5 s, then SIGKILL after 3 s more. The report is then written
with what was sampled and marked interrupted (exit code 128 + the signal's number, 130
for Ctrl-C).
"""

from __future__ import annotations

import errno
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag import nvml, procs
from gpudiag.errors import UsageError, signum_of
from gpudiag.exitstatus import describe_exit
from gpudiag.layout import NVML_TB_RUN, TAG_MONITOR
from gpudiag.markdown import markdown_table
from gpudiag.report import Finding
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import gpu_use as gpu_verdicts

DEFAULT_IDLE_THRESHOLD_PERCENT = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT

#: After the interrupting signal has been passed on to the command's process group:
#: how long to wait, then SIGTERM, then SIGKILL.
_FORWARD_WAIT_S = 5.0


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
    _check_runnable(Path(shutil.which(program) or program))
    return list(command)


_EXECUTABLE_MAGIC = (b"#!", b"\x7fELF")


def _check_runnable(path: Path) -> None:
    """A file the kernel would refuse (ENOEXEC): say so before any run directory exists."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError:
        return  # unreadable but executable: let exec decide
    if head and not head.startswith(_EXECUTABLE_MAGIC):
        raise UsageError(f"cannot run {path}: it has no #! line (a script needs a first line "
                         f"such as #!/bin/sh, or run it through its interpreter: sh {path})")
    if head.startswith(b"#!"):
        _check_interpreter(path)


def _check_interpreter(path: Path) -> None:
    """A ``#!`` naming an interpreter that is not there (the kernel's ENOENT, which names
    the script): said before any run directory exists, naming the interpreter."""
    try:
        with path.open("rb") as handle:
            line = handle.readline(4096)
    except OSError:
        return
    words = line[2:].strip().split()
    if not words:
        return
    interpreter = Path(os.fsdecode(words[0]))
    if interpreter.is_absolute() and not os.access(interpreter, os.X_OK):
        why = "does not exist" if not interpreter.exists() else "is not executable"
        raise UsageError(f"cannot run {path}: its #! line names {interpreter}, which {why}")


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


def stop_child(proc: subprocess.Popen[bytes], signum: int) -> None:
    """Pass the interrupting signal on to the command's whole process group (it runs in
    a group of its own, so the terminal's Ctrl-C reaches gpudiag only), give it time to
    end cleanly, then end the group for certain."""
    procs.stop_group(proc, ((signum, _FORWARD_WAIT_S), *procs.STOP_SEQUENCE))


def exit_code_of(returncode: int) -> int:
    """A shell's convention: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def command_finding(argv: list[str], returncode: int | None, duration_s: float,
                    interrupted: bool) -> Finding:
    shown = " ".join(shlex.join(argv).split())  # one line, even for `python -c` programs
    if len(shown) > 80:
        shown = shown[:77] + "..."
    evidence: dict[str, Any] = {"command": argv, "returncode": returncode,
                                "duration_s": round(duration_s, 3), "interrupted": interrupted}
    if interrupted:
        return Finding("monitor.command", "warn",
                       f"interrupted after {duration_s:.1f} s; the command "
                       f"{describe_exit(returncode)}", evidence,
                       advice="The findings cover only the time before the interruption.")
    if returncode == 0:
        return Finding("monitor.command", "ok",
                       f"`{shown}` exited with code 0 after {duration_s:.1f} s", evidence)
    return Finding("monitor.command", "fail",
                   f"`{shown}` {describe_exit(returncode)} after {duration_s:.1f} s", evidence,
                   advice="Its own output (passed through above) says why; gpudiag exits "
                          "with the same code.")


def _device_rows(result: nvml.SamplingResult) -> list[list[Any]]:
    rows = []
    for s in result.summaries:
        n = gpu_verdicts.gpu_numbers(s)
        rows.append([s.index, n["name"] or "?", n["pci_bus_id"] or "?", n["util_mean_percent"],
                     n["util_p95_percent"], n["util_max_percent"], n["active_s"],
                     None if n["peak_memory_used_bytes"] is None
                     else round(n["peak_memory_used_bytes"] / 2**20),
                     ", ".join(str(p) for p in n["processes"]), s.error or ""])
    return rows


def _write_sampling(session: RunSession, result: nvml.SamplingResult) -> None:
    tags = nvml.write_scalars(result, session.run_dir / NVML_TB_RUN)
    if tags:
        from gpudiag import tbviews

        tbviews.write_charts(session.run_dir, [tbviews.nvml_charts()])
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
    ui: Ui,
    clock: nvml.Clock = nvml.SYSTEM_CLOCK,
) -> int | None:
    """Run ``command`` while sampling; add the findings. Returns the exit code to forward
    (None when the command exited 0: the findings decide). KeyboardInterrupt propagates
    after the child is stopped and the findings are written. ``clock`` schedules the
    sampler (tests give a fake one)."""
    sampler: nvml.Sampler | None = None
    description = None if isinstance(backend, nvml.NvmlUnavailable) else backend.description
    reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    if not isinstance(backend, nvml.NvmlUnavailable):
        sampler = nvml.Sampler(backend, interval_s, gpus,
                               active_threshold_percent=idle_threshold_percent, clock=clock)
        try:
            sampler.start()
        except nvml.DeviceError as exc:  # NVML itself failed (not one device): no sampling
            sampler, reason = None, f"NVML failed at start: {exc}"
    session.set("environment", {"nvml_backend": description,
                                "nvml_unavailable_reason": reason})
    if sampler is None:
        session.set("devices", {"summary": f"NVML not available ({reason}); GPU checks skipped"})
        session.add(gpu_verdicts.nvml_sampling(None, reason, interval_s, None,
                                               check_id="monitor.nvml"))
        ui.say(f"NVML not available ({reason}): running the command without GPU sampling")
    else:
        ui.say(f"sampling {len(sampler.device_indices)} GPU(s) every {interval_s:g} s "
            f"({description})")

    interrupted = False
    interrupt: KeyboardInterrupt | None = None
    returncode: int | None = None
    start = time.monotonic()
    try:
        try:
            proc = procs.spawn(command, stdout=sys.stderr if stdout_to_stderr else None)
        except OSError as exc:
            hint = ""
            if exc.errno == errno.ENOEXEC:
                hint = (" (a script needs a first line such as #!/bin/sh, or run it through "
                        f"its interpreter: sh {command[0]})")
            raise UsageError(f"cannot run {command[0]}: {exc.strerror}{hint}") from exc
        try:
            returncode = proc.wait()
            procs.release(proc)
        except KeyboardInterrupt as exc:
            interrupted, interrupt = True, exc
            stop_child(proc, signum_of(exc))
            returncode = proc.returncode
        if returncode:  # 0: the findings decide the exit code
            session.forward_exit(exit_code_of(returncode))
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
                "nvml_devices": [gpu_verdicts.gpu_numbers(s) for s in result.summaries],
            })
            session.add(gpu_verdicts.nvml_sampling(result.backend, None, interval_s, result,
                                                   check_id="monitor.nvml"))
            _write_sampling(session, result)
        session.add(gpu_verdicts.every_gpu_used(
            result.summaries if result else [], idle_threshold_percent,
            nvml_unavailable_reason=reason, expected_indices=gpus,
            check_id="monitor.every-gpu-used"))
    if interrupt is not None:
        raise interrupt
    return exit_code_of(returncode) if returncode else None

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

Writes: report.json/report.md with findings ``monitor.command``, ``monitor.nvml``,
``monitor.every-gpu-used`` and (when NVML sampled) ``monitor.sm-utilization`` (NVML's
utilization against GPM's SM utilization and occupancy, where the GPU offers GPM);
per-GPU scalars in the ``nvml/`` TensorBoard run (gpudiag.nvml.write_scalars); a per-GPU
table as TensorBoard text (``gpudiag/monitor``).

NVML comes in as ``backend``, opened before and closed after by the caller (the CLI,
with gpudiag.nvml.opened); this module never opens or closes it.

Ctrl-C, SIGTERM, SIGHUP: gpudiag passes the same signal on to the command's process
group, then SIGTERM after 5 s, then SIGKILL after 3 s more. The report is then written
with what was sampled and marked interrupted (exit code 128 + the signal's number, 130
for Ctrl-C).
"""

from __future__ import annotations

import errno
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag import nvml
from gpudiag.errors import UsageError, signum_of
from gpudiag.layout import NVML_TB_RUN, TAG_MONITOR
from gpudiag.markdown import markdown_table
from gpudiag.procs import group as procs
from gpudiag.procs import stops
from gpudiag.procs.command import exit_code_of, stop_child
from gpudiag.procs.exitstatus import describe_exit
from gpudiag.report import Finding
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import gpu_fill
from gpudiag.verdicts import gpu_use as gpu_verdicts

DEFAULT_IDLE_THRESHOLD_PERCENT = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT

def command_finding(argv: list[str], returncode: int | None, duration_s: float,
                    interrupted: bool) -> Finding:
    shown = " ".join(shlex.join(argv).split())  # one line, even for `python -c` programs
    evidence: dict[str, Any] = {"command": argv, "returncode": returncode,
                                "duration_s": round(duration_s, 3), "interrupted": interrupted}
    if interrupted:
        return Finding("monitor.command", "warn",
                       f"interrupted after {duration_s:.1f} s; the command "
                       f"{describe_exit(returncode)}", evidence,
                       title=f"interrupted after {duration_s:.1f} s; the command "
                             f"{describe_exit(returncode)}",
                       advice="The findings cover only the time before the interruption.")
    if returncode == 0:
        return Finding("monitor.command", "ok",
                       f"`{shown}` exited with code 0 after {duration_s:.1f} s", evidence,
                       title=f"the command exited with code 0 after {duration_s:.1f} s")
    return Finding("monitor.command", "fail",
                   f"`{shown}` {describe_exit(returncode)} after {duration_s:.1f} s", evidence,
                   title=f"the command {describe_exit(returncode)} after {duration_s:.1f} s",
                   advice="Its own output (passed through above) says why; gpudiag exits "
                          "with the same code.")


def _device_rows(result: nvml.SamplingResult) -> list[list[Any]]:
    rows = []
    for s in result.summaries:
        n = gpu_verdicts.gpu_numbers(s)
        rows.append([s.index, n["name"] or "?", n["pci_bus_id"] or "?", n["util_mean_percent"],
                     n["util_p95_percent"], n["util_max_percent"],
                     n["sm_util_mean_percent"], n["sm_occupancy_mean_percent"], n["active_s"],
                     None if n["peak_memory_used_bytes"] is None
                     else round(n["peak_memory_used_bytes"] / 2**20),
                     ", ".join(str(p) for p in n["processes"]), s.error or ""])
    return rows


def _write_sampling(session: RunSession, result: nvml.SamplingResult) -> None:
    tags = nvml.write_scalars(result, session.run_dir / NVML_TB_RUN)
    if tags:
        from gpudiag.tb import views as tbviews

        tbviews.write_charts(session.run_dir, [tbviews.nvml_charts()])
    session.text(TAG_MONITOR, markdown_table(
        ["gpu", "name", "pci bus id", "util mean %", "util p95 %", "util max %",
         "GPM SM util mean %", "GPM occupancy mean %", "active s",
         "peak memory MiB", "pids", "error"], _device_rows(result)))
    session.set("nvml_tensorboard", {"run": NVML_TB_RUN, "tags": tags})


@dataclass(frozen=True)
class MonitorOptions:
    """What `monitor` was asked: the command and how to sample while it runs."""

    command: list[str]
    interval_s: float = nvml.DEFAULT_INTERVAL_S
    idle_threshold_percent: float = DEFAULT_IDLE_THRESHOLD_PERCENT
    gpus: Sequence[int] | None = None  # None: every GPU NVML sees
    stdout_to_stderr: bool = False  # --json: stdout is report.json's


def run(session: RunSession, options: MonitorOptions, *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui,
        clock: nvml.Clock = nvml.SYSTEM_CLOCK) -> int | None:
    """Run the command while sampling; add the findings. Returns the exit code to forward
    (None when the command exited 0: the findings decide). KeyboardInterrupt propagates
    after the child is stopped and the findings are written. ``clock`` schedules the
    sampler (tests give a fake one)."""
    sampler, reason = _start_sampler(session, options, backend, ui, clock)
    outcome = _Outcome()
    start = time.monotonic()
    try:
        _run_command(session, options.command, options.stdout_to_stderr, outcome)
    finally:
        result = sampler.stop() if sampler is not None else None
        _record(session, options, outcome, time.monotonic() - start, result, reason)
    if outcome.interrupt is not None:
        raise outcome.interrupt
    return exit_code_of(outcome.returncode) if outcome.returncode else None


@dataclass
class _Outcome:
    returncode: int | None = None
    interrupt: KeyboardInterrupt | None = None


def _start_sampler(session: RunSession, options: MonitorOptions,
                   backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui,
                   clock: nvml.Clock) -> tuple[nvml.Sampler | None, str | None]:
    """The sampler, started (None without NVML, or when NVML failed at start: the reason)."""
    sampler: nvml.Sampler | None = None
    description = None if isinstance(backend, nvml.NvmlUnavailable) else backend.description
    reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    if not isinstance(backend, nvml.NvmlUnavailable):
        sampler = nvml.Sampler(backend, options.interval_s, options.gpus,
                               active_threshold_percent=options.idle_threshold_percent,
                               clock=clock)
        try:
            sampler.start()
        except nvml.DeviceError as exc:  # NVML itself failed (not one device): no sampling
            sampler, reason = None, f"NVML failed at start: {exc}"
    session.set("environment", {"nvml_backend": description,
                                "nvml_unavailable_reason": reason})
    if sampler is None:
        session.set("devices", {"summary": f"NVML not available ({reason}); GPU checks skipped"})
        session.add(gpu_verdicts.nvml_sampling(None, reason, options.interval_s, None,
                                               check_id="monitor.nvml"))
        ui.say(f"NVML not available ({reason}): running the command without GPU sampling")
    else:
        ui.say(f"sampling {len(sampler.device_indices)} GPU(s) every {options.interval_s:g} s "
               f"({description})")
    return sampler, reason


def _run_command(session: RunSession, command: list[str], stdout_to_stderr: bool,
                 outcome: _Outcome) -> None:
    """Start the command and wait for it; an interrupt stops it and is kept in ``outcome``.
    A SIGTERM or SIGHUP that comes while the command starts is kept until its wait
    (stops.defer, as `gpudiag run` does): raised inside the start, it left no
    monitor.command; a Ctrl-C there stops what had started (procs.spawn) and is kept."""
    stops.defer()
    try:
        proc = procs.spawn(command, stdout=sys.stderr if stdout_to_stderr else None)
    except BaseException as exc:
        stops.undefer()
        if isinstance(exc, KeyboardInterrupt):
            outcome.interrupt = exc
            return
        if not isinstance(exc, OSError):
            raise
        hint = ""
        if exc.errno == errno.ENOEXEC:
            hint = (" (a script needs a first line such as #!/bin/sh, or run it through "
                    f"its interpreter: sh {command[0]})")
        raise UsageError(f"cannot run {command[0]}: {exc.strerror}{hint}") from exc
    try:
        stops.resume()  # a request kept while the command started: acted on now
        outcome.returncode = procs.wait(proc)
        procs.release(proc)
    except KeyboardInterrupt as exc:
        outcome.interrupt = exc
        stop_child(proc, signum_of(exc))
        outcome.returncode = proc.returncode
    # the command's own code, 0 included: the findings never change a job's outcome
    session.forward_exit(exit_code_of(outcome.returncode))


def _record(session: RunSession, options: MonitorOptions, outcome: _Outcome, duration: float,
            result: nvml.SamplingResult | None, reason: str | None) -> None:
    """The command's data and findings, whatever ended it."""
    interrupted = outcome.interrupt is not None
    gpus = options.gpus
    session.set("monitor", {
        "command": options.command, "returncode": outcome.returncode,
        "duration_s": round(duration, 3), "interval_s": options.interval_s,
        "idle_threshold_percent": options.idle_threshold_percent,
        "gpus": None if gpus is None else list(gpus), "interrupted": interrupted,
        "sampling": None if result is None else result.to_dict(),
    })
    if outcome.returncode is not None or interrupted:
        session.add(command_finding(options.command, outcome.returncode, duration, interrupted))
    if result is not None:
        session.set("devices", {
            "summary": ", ".join(s.label for s in result.summaries) + " (NVML)",
            "nvml_devices": [gpu_verdicts.gpu_numbers(s) for s in result.summaries],
        })
        session.add(gpu_verdicts.nvml_sampling(result.backend, None, options.interval_s,
                                               result, check_id="monitor.nvml"))
        _write_sampling(session, result)
    session.add(gpu_verdicts.every_gpu_used(
        result.summaries if result else [], options.idle_threshold_percent,
        nvml_unavailable_reason=reason, expected_indices=gpus,
        check_id="monitor.every-gpu-used"))
    if result is not None:
        session.add(gpu_fill.sm_utilization(
            [gpu_verdicts.gpu_numbers(s) for s in result.summaries
             if gpus is None or s.index in gpus],
            nvml_unavailable_reason=None, check_id="monitor.sm-utilization"))

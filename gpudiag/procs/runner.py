"""Runs each probe in a child process: ``python -m gpudiag.procs.child <probe> <config> <result>``.

Why a child: TensorFlow's device configuration is process-global and frozen once devices
are initialised, memory modes need fresh processes, and the device-placement log is
written by TF's C++ logging to the process's stderr, which the parent captures whole.

The parent writes the child's config.json (a dict, or a typed record's ``to_dict()``:
gpudiag/records/training.py), sends stdout and stderr to files (whole, no
pipe to fill up), enforces a timeout by killing the child's whole process group, and
reads result.json. A crash (signal, non-zero exit, no result) or a hang past the timeout
comes back as a ChildResult with ``ok`` False and the tail of stderr, never an exception:
the run goes on and the report says what happened.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from gpudiag.errors import EnvironmentBroken
from gpudiag.layout import CONFIG_JSON, RESULT_JSON, STDERR_TXT, STDOUT_TXT, child_dir
from gpudiag.procs import group as procs
from gpudiag.procs.exitstatus import describe_exit

DEFAULT_TIMEOUT_S = 120.0


class JsonRecord(Protocol):
    """A typed config record (gpudiag/records/training.py): plain JSON data via to_dict."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True)
class ChildResult:
    """What one child process left behind. ``result`` is the probe's plain data; a typed
    probe's caller reads it back with its record's ``from_dict``."""

    name: str
    probe: str
    ok: bool
    result: dict[str, Any] | None
    error: str | None  # one line; None when ok
    error_type: str | None
    returncode: int | None
    timed_out: bool
    duration_s: float
    dir: Path
    stderr_tail: list[str] = field(default_factory=list)

    @property
    def stderr_path(self) -> Path:
        return self.dir / STDERR_TXT

    @property
    def stdout_path(self) -> Path:
        return self.dir / STDOUT_TXT

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")

    def evidence(self) -> dict[str, Any]:
        """Plain data for a finding about this child."""
        return {
            "child": self.name,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "duration_s": round(self.duration_s, 3),
            "error_type": self.error_type,
            "error": self.error,
            "stderr_tail": self.stderr_tail,
            "stderr_file": str(self.stderr_path),
        }


def tail_lines(path: Path, lines: int = 12) -> list[str]:
    """The last ``lines`` non-blank lines of a child's output file ([] if unreadable)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return [ln for ln in text.splitlines() if ln.strip()][-lines:]




def run_child(
    probe: str,
    config: Mapping[str, Any] | JsonRecord,
    *,
    run_dir: Path,
    name: str,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    env: dict[str, str] | None = None,
) -> ChildResult:
    """Run ``probe`` (a module under gpudiag.probes, or a dotted module path) in a child.

    ``env`` entries are laid over this process's environment. KeyboardInterrupt kills the
    child and propagates, so the caller can write a partial report. A child that cannot
    import TensorFlow raises EnvironmentBroken (exit 3): no probe can run at all.
    """
    cdir = child_dir(run_dir, name)
    config_path, result_path = cdir / CONFIG_JSON, cdir / RESULT_JSON
    plain = dict(config) if isinstance(config, Mapping) else config.to_dict()
    config_path.write_text(json.dumps(plain, indent=2), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    child_env = {**os.environ, **(env or {})}
    argv = [sys.executable, "-m", "gpudiag.procs.child", probe, str(config_path), str(result_path)]
    start = time.monotonic()
    timed_out = False
    with (cdir / STDOUT_TXT).open("wb") as out, (cdir / STDERR_TXT).open("wb") as err:
        proc = procs.spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                           env=child_env)
        try:
            procs.wait(proc, timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            procs.stop_group(proc)
        except BaseException:
            procs.stop_group(proc)
            raise
        procs.release(proc)
    duration = time.monotonic() - start
    tail = tail_lines(cdir / STDERR_TXT)
    payload: dict[str, Any] | None = None
    if result_path.exists():
        try:
            payload = json.loads(result_path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            payload = None

    ok, result, error_type, error = _outcome(payload, proc.returncode, timed_out, timeout_s)
    if error_type == "ModuleNotFoundError" and "tensorflow" in (error or ""):
        raise EnvironmentBroken(
            f"TensorFlow cannot be imported by {sys.executable} ({error}); install it: "
            "pip install tensorflow (or tensorflow[and-cuda])")
    return ChildResult(
        name=name, probe=probe, ok=ok, result=result, error=error, error_type=error_type,
        returncode=proc.returncode, timed_out=timed_out, duration_s=duration, dir=cdir,
        stderr_tail=tail,
    )


def _outcome(
    payload: dict[str, Any] | None, returncode: int | None, timed_out: bool, timeout_s: float
) -> tuple[bool, dict[str, Any] | None, str | None, str | None]:
    """(ok, result, error_type, error) from what the child left behind."""
    if timed_out:
        return (False, None, "Timeout",
                f"the child process did not finish within {timeout_s:g} s and was killed")
    if payload is None:
        return (False, None, "Crash",
                f"the child process {describe_exit(returncode)} and left no result")
    if not payload.get("ok"):
        return (False, payload.get("result"), payload.get("error_type"),
                payload.get("error") or "the probe failed")
    return True, payload.get("result") or {}, None, None

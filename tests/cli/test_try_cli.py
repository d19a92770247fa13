"""`gpudiag try`'s bad input: one line, exit 2; a program that never imports TensorFlow
still gets its diagnosis, kept in the try run's runs/diagnosis."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers import REPO, assert_usage_error, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag import layout


@pytest.mark.slow
@pytest.mark.parametrize(("args", "env", "needle"), [
    ((), {}, "try needs a command to run: gpudiag try [OPTIONS] -- CMD"),
    (("--", sys.executable, "-c", "print(1)"), {"TF_CONFIG": "{}"},
     "TF_CONFIG is set: gpudiag try does not try multi-worker jobs yet"),
    (("--fix", "mixed-precision", "--", sys.executable, "-c", "print(1)"), {},
     "no such fix: mixed-precision"),
    (("--", sys.executable, "no_such_script.py"), {}, "no such script: no_such_script.py"),
])
def test_bad_input_is_one_line_and_exit_2_before_anything_runs(
        tmp_path, args: tuple[str, ...], env: dict[str, str], needle: str) -> None:  # type: ignore[no-untyped-def]
    logdir = tmp_path / "runs"
    assert_usage_error(gpudiag("try", "--logdir", str(logdir), *args, env=env), needle,
                       logdir)


@pytest.mark.slow
def test_a_program_without_tensorflow_gets_its_diagnosis_and_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    logdir = tmp_path / "runs"
    proc = gpudiag("try", "--logdir", str(logdir), "--", sys.executable, "-c", "print(42)")
    assert proc.returncode == 2
    assert "42" in proc.stdout  # the program ran, as written
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("gpudiag: error: the program never imported TensorFlow")
    assert "Traceback" not in proc.stderr
    (run_dir,) = run_dirs(logdir)
    diagnosis = load_report(run_dir / layout.TRY_RUNS_DIR / layout.TRY_DIAGNOSIS)
    assert findings_by_id(diagnosis)["run.tensorflow"]["status"] == "skip"
    assert not any(p.name.startswith("r1-") for p in (run_dir / layout.TRY_RUNS_DIR).iterdir())


@pytest.mark.slow
def test_try_fixes_in_python_runs_the_diagnosis_and_says_the_one_line(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """gpudiag.try_fixes, the library's `gpudiag try`: the program ran as written, gpudiag's
    own one-line error (no traceback of gpudiag's), its diagnosis kept, nothing printed of
    gpudiag's on stdout."""
    logdir = tmp_path / "runs"
    code = f"""
import json, sys, gpudiag
try:
    gpudiag.try_fixes([sys.executable, "-c", "print(42)"], logdir={str(logdir)!r})
except gpudiag.UsageError as exc:
    print(json.dumps({{"error": str(exc)}}))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert lines[0] == "42"  # the program's own output, as written
    assert json.loads(lines[-1])["error"].startswith("the program never imported TensorFlow")
    (run_dir,) = run_dirs(logdir)
    diagnosis = load_report(run_dir / layout.TRY_RUNS_DIR / layout.TRY_DIAGNOSIS)
    assert findings_by_id(diagnosis)["run.tensorflow"]["status"] == "skip"


def test_a_trial_past_its_time_limit_is_ended_and_read_as_a_hang(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A trial that hangs (here a program that sleeps for ever, where the program as
    written ended) is ended at its time limit, SIGTERM then SIGKILL after the grace, and
    read back as "did not end within": the fix broke the program, never a speed-up. The
    trial's own code path (commands.run under a try trial's options), in a child process
    of its own, as `gpudiag try` runs it."""
    run_dir = tmp_path / "r1-parallel-map"
    code = f"""
import sys, time
from pathlib import Path
from gpudiag import nvml
from gpudiag.commands import run as run_cmd
from gpudiag.run.options import RunOptions
from gpudiag.session import RunSession
from gpudiag.ui import Ui
hang = [sys.executable, "-c", "import signal, time; "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"]
start = time.monotonic()
with nvml.opened() as backend, RunSession.at("run", Path({str(run_dir)!r})) as one:
    run_cmd.run(one, hang, backend=backend, ui=Ui.quiet(),
                options=RunOptions(time_limit_s=2.0, grace_s=1.0, quiet=True, echo=False))
print(round(time.monotonic() - start, 1))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    took = float(proc.stdout.strip().splitlines()[-1])
    assert took < 60, (took, proc.stderr[-2000:])  # not the program's 600 s
    command = findings_by_id(load_report(run_dir))["run.command"]
    assert command["status"] == "fail" and command["evidence"]["time_limited_s"] == 2.0
    assert command["title"] == "the program did not end within 2 s: gpudiag ended it"
    assert command["evidence"]["returncode"] == -9  # it ignored the SIGTERM: killed

    from gpudiag.commands.trialread import read_trial
    from gpudiag.verdicts.trial import Trial, broke

    hung = read_trial(run_dir, "parallel-map", 1, None)
    assert hung.crash is not None and hung.crash.startswith("it did not end within 2 s")
    as_written = Trial("", 1, 0.01, 0, None, str(tmp_path / "r1-as-written"))
    assert broke([as_written, hung], "parallel-map") == hung.crash

"""`gpudiag try`'s bad input: one line, exit 2; a program that never imports TensorFlow
still gets its diagnosis, kept in the try run's runs/diagnosis."""

from __future__ import annotations

import sys

import pytest
from helpers import assert_usage_error, findings_by_id, gpudiag, load_report, run_dirs

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

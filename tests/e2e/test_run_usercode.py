"""Which code is the program's: by module origin, wherever a library was installed, and
autograph's generated code mapped back to the program's lines (gpudiag.inprogram.usercode)."""

from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag.inprogram import usercode

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"


def test_a_package_installed_with_pip_target_is_a_library_wherever_it_lies(
        tmp_path: Path) -> None:
    target = tmp_path / "target"  # what `pip install --target target somelib` leaves
    (target / "somelib" / "sub").mkdir(parents=True)
    (target / "somelib" / "__init__.py").write_text("")
    (target / "somelib" / "sub" / "__init__.py").write_text("")
    (target / "somelib" / "sub" / "train.py").write_text("")
    (target / "somelib_dist-2.1.0.dist-info").mkdir()  # its name need not be the package's
    (target / "somelib_dist-2.1.0.dist-info" / "RECORD").write_text(
        "somelib/__init__.py,sha256=x,0\nsomelib/sub/train.py,sha256=y,0\n")
    project = tmp_path / "project"  # the user's own package: no distribution metadata
    (project / "mypkg").mkdir(parents=True)
    (project / "mypkg" / "__init__.py").write_text("")
    (project / "mypkg" / "train.py").write_text("")
    (project / "train.py").write_text("")
    (project / "other-1.0.dist-info").mkdir()  # a dist beside the project owns not mypkg
    (project / "other-1.0.dist-info" / "top_level.txt").write_text("other\n")
    assert not usercode.is_user_file(str(target / "somelib" / "sub" / "train.py"))
    assert usercode.is_user_file(str(project / "mypkg" / "train.py"))
    assert usercode.is_user_file(str(project / "train.py"))
    assert not usercode.is_user_file("/tmp/__autograph_generated_fileq1w2e3.py")


def _run(tmp: Path, program: Path, *args: str, env: dict[str, str] | None = None
         ) -> tuple[int, str, dict[str, dict[str, Any]]]:
    logdir = tmp / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--", PY,
                   str(program), *args, env=env)
    (run_dir,) = run_dirs(logdir)
    report = load_report(run_dir)
    return proc.returncode, proc.stdout, findings_by_id(report)


@pytest.mark.slow
@pytest.mark.parametrize("package", ["tf_keras", "keras"])
def test_keras_on_pythonpath_from_a_target_dir_is_not_taken_for_the_programs_code(
        tmp_path: Path, package: str) -> None:
    """tf_keras's train_function is a plain tf.function: from a --target directory on
    PYTHONPATH it was once judged as the program's step function (issue 19)."""
    module = importlib.import_module(package)  # the installed one, copied as
    source = Path(str(module.__file__)).parent  # `pip install --target` lays it out
    target = tmp_path / "target"
    shutil.copytree(source, target / package)
    for meta in source.parent.glob(f"{package}-*.dist-info"):
        shutil.copytree(meta, target / meta.name)
    code, out, found = _run(tmp_path, PROGRAMS / "keras_fit_tiny.py", package,
                            env={"PYTHONPATH": f"{target}:{REPO}"})
    assert code == 0 and f"keras from {target}" in out
    loops = found["run.learning"]["evidence"]["loops"]
    assert [row["series"] for row in loops] == ["Model.fit"]  # not Keras's own train function
    assert loops[0]["num_classes"] == 10
    assert "sparse_categorical_crossentropy" in loops[0]["classes_from"]
    assert found["run.learning"]["status"] == "ok"


@pytest.mark.slow
def test_a_crash_in_autograph_code_is_placed_at_the_programs_line(tmp_path: Path) -> None:
    code, _, found = _run(tmp_path, PROGRAMS / "autograph_crash.py")
    crash = found["run.crash"]
    assert code == 1 and crash["status"] == "fail"
    frame = crash["evidence"]["user_frame"]
    assert frame["file"] == str(PROGRAMS / "autograph_crash.py") and frame["line"] == 10
    assert frame["function"] == "step" and frame["autograph"].startswith(
        "__autograph_generated_file")
    assert "at autograph_crash.py:10" in crash["message"]
    assert "tf.matmul(x, tf.ones([3, 3]))" in crash["message"]

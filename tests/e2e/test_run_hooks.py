"""`gpudiag run`'s hooks without TensorFlow: loading, chaining, recording, never breaking.

Real child interpreters started the way `gpudiag run` starts them; TensorFlow is not
imported by any of these programs (tests/e2e/test_run_e2e.py runs real TensorFlow ones).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    REPO,
    TESTS_DIR,
    assert_usage_error,
    findings_by_id,
    gpudiag,
    load_report,
    read_scalars,
    run_dirs,
)

from gpudiag import layout
from gpudiag.commands.run import HOOKS_DIR, program_env
from gpudiag.inprogram import importhook
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.inprogram.recorder import Recorder
from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.run import eventfiles

PY = sys.executable


def test_parent_modules_import_no_tensorflow() -> None:
    code = ("import sys\n"
            "import gpudiag.cli, gpudiag.commands.run, gpudiag.run.analyse, gpudiag.run.events\n"
            "import gpudiag.run.streams, gpudiag.run.tbwrite, gpudiag.verdicts.run.process\n"
            "import gpudiag.verdicts.run.progress, gpudiag.catalogue\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
            "assert 'keras' not in sys.modules, 'keras imported'\n")
    proc = subprocess.run([PY, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_the_sitecustomize_copies_layouts_names() -> None:
    text = (HOOKS_DIR / "sitecustomize.py").read_text()
    assert f'_PKG_ROOT_ENV = "{layout.ENV_RUN_PKG_ROOT}"' in text
    assert f'_MARKER = "{layout.RUN_MARKER}{layout.RUN_MARK_HOOK_ERROR} "' in text


def test_hooks_chain_to_the_users_sitecustomize_and_record_every_python_process(
        tmp_path: Path, logdir: Path) -> None:
    user_site = tmp_path / "usersite"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text(
        "import os, sys\nMARK = 42\nprint('USER-SITECUSTOMIZE ran in', os.getpid(), "
        "file=sys.stderr)\n")
    program = ("import subprocess, sys, sitecustomize\n"
               "print('chained', sitecustomize.MARK, 'tf', 'tensorflow' in sys.modules)\n"
               "subprocess.run([sys.executable, '-c', 'print(\"worker\")'], check=True)\n")
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, "-c", program,
                   env={"PYTHONPATH": f"{REPO}{os.pathsep}{user_site}"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "chained 42 tf False" in proc.stdout and "worker" in proc.stdout
    # once in each interpreter: gpudiag's own, the program's and its worker's
    ran_in = [ln.split()[-1] for ln in proc.stderr.splitlines() if "USER-SITECUSTOMIZE" in ln]
    assert len(ran_in) == 3 and len(set(ran_in)) == 3, proc.stderr
    assert "GPUDIAG-RUN" not in proc.stderr
    run = run_dirs(logdir)[0]
    observed, bad = eventfiles.observe_all(run / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME)
    assert bad.count == 0 and len(observed) == 2
    assert observed[1].ppid == observed[0].pid
    assert {str(o.pid) for o in observed} <= set(ran_in)
    assert all(o.exited and not o.imported_tf for o in observed)
    found = findings_by_id(load_report(run))
    assert found["run.tensorflow"]["status"] == "skip"
    assert "TensorFlow was never imported (2 Python process(es)" in \
        found["run.tensorflow"]["message"]
    assert found["run.crash"]["status"] == "ok"


def _hooked_env(tmp_path: Path, events_dir: Path) -> dict[str, str]:
    config = RunHookConfig(events_dir=str(events_dir), run_dir=str(tmp_path))
    return program_env({**os.environ, "PYTHONPATH": ""}, config)


def test_an_uncaught_exception_is_recorded_with_the_users_frame(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def load():\n    raise KeyError('labels')\n\nload()\n")
    events_dir = tmp_path / "ev"
    proc = subprocess.run([PY, str(script)], env=_hooked_env(tmp_path, events_dir),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "KeyError: 'labels'" in proc.stderr  # the user's view
    (obs,), _ = eventfiles.observe_all(events_dir)
    assert obs.crash is not None and obs.crash.type == "KeyError"
    assert obs.crash.user_frame == {"file": str(script), "line": 2, "function": "load",
                                    "code": "raise KeyError('labels')", "user": True}


def test_a_broken_events_directory_never_breaks_the_program(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    proc = subprocess.run([PY, "-c", "print('still runs')"],
                          env=_hooked_env(tmp_path, blocker / "ev"), capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "still runs\n", proc.stderr


def test_recorder_appends_whole_lines_and_a_fork_gets_its_own_file(tmp_path: Path) -> None:
    rec = Recorder(str(tmp_path))
    rec.emit(ev.Process(argv=["a"]))
    pid = os.fork()
    if pid == 0:  # the child writes through the same Recorder object
        rec.emit(ev.Process(argv=["child"]))
        os._exit(0)
    os.waitpid(pid, 0)
    rec.emit(ev.Exit(hook_errors=0))
    mine = tmp_path / layout.run_events_name(os.getpid())
    child = tmp_path / layout.run_events_name(pid)
    assert [json.loads(ln)["kind"] for ln in mine.read_text().splitlines()] == \
        ["process", "exit"]
    assert json.loads(child.read_text())["argv"] == ["child"]
    with mine.open("a") as f:  # a line cut short by SIGKILL
        f.write('{"kind": "strategy", "t": 1.0, "pid": ')
    by_pid, bad = eventfiles.read_events(tmp_path)
    assert (bad.count, bad.cut) == (0, 1)
    assert [type(r.event) for r in by_pid[os.getpid()]] == [ev.Process, ev.Exit]


def test_import_hook_fires_after_the_real_import_not_on_a_find_spec(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    (tmp_path / "gpudiag_fake_framework.py").write_text("READY = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen: list[bool] = []
    errors: list[str] = []
    finder = importhook.install(
        {"gpudiag_fake_framework": lambda m: seen.append(m.READY),
         "gpudiag_fake_broken": lambda m: 1 / 0},
        lambda where, exc: errors.append(f"{where}: {type(exc).__name__}"))
    try:
        assert importlib.util.find_spec("gpudiag_fake_framework") is not None
        assert seen == []
        import gpudiag_fake_framework  # noqa: F401
        assert seen == [True]
        (tmp_path / "gpudiag_fake_broken.py").write_text("X = 1\n")
        import gpudiag_fake_broken  # noqa: F401 - the hook's error is not the program's
        assert errors == ["after import gpudiag_fake_broken: ZeroDivisionError"]
    finally:
        sys.meta_path.remove(finder)
        sys.modules.pop("gpudiag_fake_framework", None)
        sys.modules.pop("gpudiag_fake_broken", None)


@pytest.mark.parametrize(("args", "needle"), [
    ([], "run needs a command"),
    (["--"], "run needs a command"),
    (["--", "no-such-command-gpudiag-xyz"], "command not found: no-such-command-gpudiag-xyz"),
    (["--", str(TESTS_DIR / "programs" / "sets_log_level.py")], "command is not executable"),
    (["--profile-steps", "-1", "--", PY, "-c", "pass"], "--profile-steps"),
])
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, logdir: Path) -> None:
    proc = gpudiag("run", "--logdir", str(logdir), *args, timeout=60)
    assert_usage_error(proc, needle, logdir)


def test_nvml_is_sampled_as_monitor_does_and_an_idle_gpu_is_named(logdir: Path) -> None:
    import fake_nvml

    from gpudiag.cli import main

    backend = fake_nvml.one_idle(n=2)
    rc = main(["run", "--logdir", str(logdir), "--interval", "0.1", "--", PY, "-c",
               "import time; time.sleep(1.5)"], open_nvml=lambda: backend)
    assert rc == 0 and backend.closed  # the program's own 0, although GPU 1 idled
    (run,) = run_dirs(logdir)
    found = findings_by_id(load_report(run))
    assert found["run.command"]["status"] == "ok"
    assert found["run.nvml"]["status"] == "ok"
    used = found["run.every-gpu-used"]
    assert used["status"] == "fail" and used["evidence"]["idle_indices"] == [1]
    assert {"gpu0/util_percent", "gpu1/util_percent"} <= set(
        read_scalars(run / layout.NVML_TB_RUN))


@pytest.mark.slow
def test_fitting_the_same_model_again_does_not_open_the_placement_window_again(
        tmp_path: Path) -> None:
    # the window (TensorFlow's run metadata on for a loop's first steps) costs those steps;
    # the same model's ops are placed as before, so a second and third fit are not watched
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(TESTS_DIR / "programs" / "fit_per_epoch.py"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.count("epoch ") == 3
    (run_dir,) = run_dirs(logdir)
    by_pid, _ = eventfiles.read_events(run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME)
    recorded = [r.event for evs in by_pid.values() for r in evs]
    opened = [e.reason for e in recorded if isinstance(e, ev.PlacementWindow)]
    assert len(opened) == 1, opened  # the first fit inside the window the context opened
    fits = [e for e in recorded if isinstance(e, lev.FitBegin)]
    assert len(fits) == 3
    # one step buffer for the model, not one a call: its first 10 steps are written one by
    # one once (three buffers wrote 30 such events), and every step of the three fits is kept
    steps = [e for e in recorded if isinstance(e, lev.FitSteps)]
    assert sum(len(e.rows) for e in steps) == 3 * 256 // 8
    assert len([e for e in steps if len(e.rows) == 1]) < 20

"""`gpudiag run` never harms the program it watches (issue 20): real programs, real
processes, real signals, a real small filesystem. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import (
    REPO,
    assert_usage_error,
    findings_by_id,
    gpudiag,
    load_report,
    process_alive,
    run_dirs,
    split_own_lines,
)

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def run_under(logdir: Path, program: str, *args: str, cwd: Path | None = None,
              timeout: float = 120, env: dict[str, str] | None = None,
              ) -> subprocess.CompletedProcess[bytes]:
    """``gpudiag run -- python -c PROGRAM ARGS`` with bytes captured."""
    return subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir), "--",
         sys.executable, "-c", program, *args],
        capture_output=True, timeout=timeout, env={**ENV, **(env or {})}, cwd=cwd or REPO,
        stdin=subprocess.DEVNULL)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, where the platform lets this test mount one."""
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: cannot make a small filesystem to fill "
                    "(tests/unit/test_run_streams.py injects ENOSPC at the same write instead)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip() or 'not permitted'}; "
                    "tests/unit/test_run_streams.py injects ENOSPC at the same write instead)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


FIVE_MB = ("import sys\n"
           "for i in range(50_000):\n"
           "    sys.stdout.write(f'{i:09d} ' + 'y' * 89 + '\\n')\n"
           "sys.stdout.flush()\n"
           "print('finished', file=sys.stderr)\n")


@pytest.mark.slow
def test_a_full_disk_stops_the_saving_not_the_program(small_fs: Path) -> None:
    logdir = small_fs / "runs"
    done = run_under(logdir, FIVE_MB)
    expected = b"".join(f"{i:09d} ".encode() + b"y" * 89 + b"\n" for i in range(50_000))
    err = done.stderr.decode()
    assert expected in done.stdout, err[-2000:]  # all 5 MB reached the terminal, in order
    assert "finished" in err  # the program ran to its end
    assert b"Traceback" not in done.stderr + done.stdout
    # the copy stops at the reserve it leaves the program (issue 26, case 7), before the
    # disk is full: the program's code (0) is gpudiag's (ENOSPC itself: test_run_streams)
    assert done.returncode == 0, err[-2000:]
    (run_dir,) = run_dirs(logdir)
    said = [ln for ln in err.splitlines() if ln.startswith("gpudiag: ")]
    assert any(str(run_dir / "children" / "program" / "stdout.txt") in ln
               and "for the program" in ln for ln in said), said
    assert not list(logdir.rglob("*.tmp"))


@pytest.mark.slow
def test_a_program_that_changes_directory_keeps_its_trace_and_crash_stack_in_the_run(
        tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", "runs", "--", sys.executable,
         str(REPO / "tests" / "programs" / "moves_cwd.py"), str(elsewhere)],
        capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 128 + 11, done.stderr[-3000:]
    assert "30 steps in" in done.stdout
    assert list(elsewhere.iterdir()) == []  # nothing of gpudiag's under the new directory
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert list(run_dir.rglob("*.xplane.pb")), "the profiled window's trace is in the run"
    found = findings_by_id(load_report(run_dir))
    assert found["run.profile"]["status"] == "ok", found["run.profile"]
    crash = found["run.crash"]
    assert crash["status"] == "fail" and "Segmentation fault" in crash["message"], crash
    assert "crash_in_user_code" in str(crash["evidence"]), crash["evidence"]


def _wait_until(predicate: object, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


DETACHED = """
import subprocess, sys, pathlib
tmp = pathlib.Path(sys.argv[1])
child = subprocess.Popen([sys.executable, "-c", '''
import os, pathlib, sys, time
tmp = pathlib.Path(sys.argv[1])
(tmp / "child.pid").write_text(str(os.getpid()))
while not (tmp / "go").exists():
    time.sleep(0.05)
print("the detached child goes on after gpudiag", flush=True)
''', str(tmp)], start_new_session=True)
print("program done", flush=True)
"""


@pytest.mark.slow
def test_a_detached_child_neither_holds_gpudiag_nor_loses_its_output(tmp_path: Path) -> None:
    out, err = tmp_path / "out", tmp_path / "err"
    start = time.monotonic()
    with out.open("wb") as o, err.open("wb") as e:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpudiag", "run", "--logdir", str(tmp_path / "runs"), "--",
             sys.executable, "-c", DETACHED, str(tmp_path)],
            stdout=o, stderr=e, stdin=subprocess.DEVNULL, env=ENV, cwd=REPO)
        code = proc.wait(timeout=120)
    took = time.monotonic() - start
    child = int((tmp_path / "child.pid").read_text())
    try:
        assert code == 0, err.read_text()[-2000:]
        assert took < 8.0, f"gpudiag waited {took:.1f} s for a child it does not own"
        assert "Traceback" not in err.read_text() + out.read_text()
        assert process_alive(child)  # left running, as plainly
        found = findings_by_id(load_report(run_dirs(tmp_path / "runs")[0]))
        assert found["run.command"]["evidence"]["returncode"] == 0
        descendants = found["run.descendants"]
        assert [d["pid"] for d in descendants["evidence"]["descendants"]] == [child]
        assert f"pid {child}" in descendants["message"]
        (tmp_path / "go").touch()  # its output after gpudiag's end still reaches the terminal
        _wait_until(lambda: b"goes on after gpudiag" in out.read_bytes(), "the child's line")
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


CHATTY_CHILD = """
import os, subprocess, sys, pathlib
tmp = pathlib.Path(sys.argv[1])
child = subprocess.Popen([sys.executable, "-c", '''
import time
while True:
    print("still talking", flush=True)
    time.sleep(0.002)
'''], start_new_session=True)
(tmp / "program.pid").write_text(str(os.getpid()))
(tmp / "child.pid").write_text(str(child.pid))
"""


@pytest.mark.slow
def test_sigterm_after_the_program_ended_still_gives_its_findings(tmp_path: Path) -> None:
    err_file = tmp_path / "err"
    with err_file.open("wb") as e:  # a file: the descendant holds gpudiag's stderr open
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpudiag", "run", "--logdir", str(tmp_path / "runs"), "--",
             sys.executable, "-c", CHATTY_CHILD, str(tmp_path)],
            stdout=subprocess.DEVNULL, stderr=e, stdin=subprocess.DEVNULL, env=ENV, cwd=REPO)
    pid_file = tmp_path / "child.pid"
    try:
        _wait_until(pid_file.exists, "the program's child")
        program = int((tmp_path / "program.pid").read_text())
        # gpudiag reads the talking descendant's output for a moment after the program's
        # exit (survivors.AFTER_END_S): the signal lands then
        _wait_until(lambda: not process_alive(program), "the program's exit")
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if pid_file.exists():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    err = err_file.read_text()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "Traceback" not in err
    report = load_report(run_dirs(tmp_path / "runs")[0])
    assert report["data"]["interrupted_by"] == "SIGTERM"
    assert findings_by_id(report)["run.command"]["evidence"]["returncode"] == 0


def test_the_program_has_ended_before_its_holder_returns(tmp_path: Path) -> None:
    """What the test above races with (a loaded machine gave 0 instead of 143 once): a
    SIGTERM between the program's exit and its holder's (gpudiag.procs.shim) is not
    passed on, and gpudiag ends 128 + 15; procs.program_ended tells that moment from the
    program running, on real processes."""
    from gpudiag.procs import group

    gate = tmp_path / "gate"
    proc = group.spawn_program([sys.executable, "-c", "import os, sys, time\n"
                                "while not os.path.exists(sys.argv[1]): time.sleep(0.01)",
                                str(gate)], stdin=subprocess.DEVNULL)
    try:
        program = group.program_pid(proc)
        assert program != proc.pid and not group.program_ended(proc)
        gate.touch()
        _wait_until(lambda: not process_alive(program), "the program's exit")
        assert group.program_ended(proc)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        group.release(proc)


EARLY_DELAYS_S = (0.1, 0.17, 0.24, 0.31, 0.38, 0.45)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_in_the_first_half_second_ends_gpudiag_cleanly(tmp_path: Path,
                                                                sig: signal.Signals) -> None:
    """Each delay lands somewhere else in gpudiag's start: importing, building the command,
    making the run directory, starting the program. Every time: 128 + the signal (or, before
    gpudiag's handler exists, death by that signal, which a shell reports the same), no
    traceback, and any run directory made holds a whole report saying the signal."""
    for i, delay in enumerate(EARLY_DELAYS_S):
        logdir = tmp_path / f"runs-{i}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir), "--",
             sys.executable, "-c", "import time; time.sleep(30)"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=ENV,
            cwd=REPO)
        time.sleep(delay)  # the delay is the point: where in the start the signal lands
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
        text = err.decode(errors="replace")
        assert proc.returncode in (128 + sig, -sig), (delay, proc.returncode, text[-2000:])
        assert "Traceback" not in text, (delay, text[-3000:])
        for run_dir in run_dirs(logdir) if logdir.exists() else []:
            report = load_report(run_dir)
            assert report["interrupted"] is True, (delay, report)
            assert report["data"]["interrupted_by"] == sig.name, (delay, report)
            assert not list(run_dir.rglob("*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "monitor"])
def test_a_file_name_that_is_not_utf8_is_reported_whole(tmp_path: Path, command: str) -> None:
    where = os.fsencode(tmp_path)
    script = where + b"/caf\xe9.py"  # Latin-1: not valid UTF-8
    Path(os.fsdecode(script)).write_text("print('ran')\n")
    logdir = tmp_path / "runs"
    done = subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"gpudiag", command.encode(), b"--logdir",
         os.fsencode(logdir), b"--", os.fsencode(sys.executable), script],
        capture_output=True, timeout=120, env={**ENV, "LC_ALL": "C.UTF-8"}, cwd=REPO,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert b"Traceback" not in done.stderr + done.stdout
    assert b"ran\n" in done.stdout
    (run_dir,) = run_dirs(logdir)
    assert not list(run_dir.rglob("*.tmp"))
    report = load_report(run_dir)  # strict UTF-8 JSON
    assert report["partial"] is False and report["interrupted"] is False
    assert "interrupted_by" not in report["data"]
    found = findings_by_id(report)[f"{command}.command"]
    assert found["evidence"]["command"][-1].endswith("/caf\\xe9.py"), found
    (run_dir / "report.md").read_text(encoding="utf-8")  # valid UTF-8


def _head_2(argv: list[str]) -> tuple[int, bytes, bytes]:
    """``argv | head -2``: two lines read, then the pipe closed."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=ENV, cwd=REPO)
    assert proc.stdout is not None and proc.stderr is not None
    head = proc.stdout.readline() + proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(timeout=120), head, err


MANY_LINES = "for i in range(3_000_000):\n    print('line', i)\n"


@pytest.mark.slow
def test_a_closed_stdout_reaches_the_program_as_plainly(tmp_path: Path) -> None:
    plain = _head_2([sys.executable, "-c", MANY_LINES])
    under = _head_2([sys.executable, "-m", "gpudiag", "run", "--logdir", str(tmp_path),
                     "--", sys.executable, "-c", MANY_LINES])
    assert plain[0] == under[0] == 1, under  # the program's own BrokenPipeError, forwarded
    assert plain[1] == under[1] == b"line 0\nline 1\n"  # stdout is the program's alone
    _, program_err, after = split_own_lines(under[2], "run")
    assert program_err.decode().splitlines() == plain[2].decode().splitlines()  # as plainly
    assert "BrokenPipeError" in plain[2].decode()
    (run_dir,) = run_dirs(tmp_path)
    assert str(run_dir / "report.md") in after.decode().replace("\n", "")  # said on stderr
    assert findings_by_id(load_report(run_dir))["run.command"]["evidence"]["returncode"] == 1


VMODULE = """
import os
os.environ["TF_CPP_VMODULE"] = "placer=2"
import tensorflow as tf
tf.function(lambda x: tf.matmul(x, x) + 1.0)(tf.ones([2, 2]))
"""


def _placer_lines(stderr: bytes) -> set[str]:
    return {ln.split("] ", 1)[1] for ln in stderr.decode(errors="replace").splitlines()
            if "placer.cc:" in ln and "] " in ln}


@pytest.mark.slow
def test_a_placer_log_the_program_asked_for_reaches_the_terminal(tmp_path: Path) -> None:
    plain = subprocess.run([sys.executable, "-c", VMODULE], capture_output=True, env=ENV,
                           timeout=300, stdin=subprocess.DEVNULL)
    under = run_under(tmp_path, VMODULE, timeout=300)
    assert plain.returncode == under.returncode == 0, under.stderr[-2000:]
    wanted = _placer_lines(plain.stderr)
    assert len(wanted) > 5
    assert wanted <= _placer_lines(under.stderr)


@pytest.mark.slow
def test_a_run_directory_removed_mid_run_is_one_line(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    remove = f"import shutil; shutil.rmtree({str(logdir)!r}); print('removed it')"
    done = run_under(logdir, remove)
    err = done.stderr.decode()
    assert b"removed it" in done.stdout
    assert "Traceback" not in err
    assert done.returncode == 0, err  # the program ran its course: its code, and one line
    lines = [ln for ln in err.splitlines() if ln.startswith("gpudiag: error:")]
    assert len(lines) == 1 and "was removed while the program ran" in lines[0], err


def test_a_shebang_naming_a_missing_interpreter_is_refused_like_no_shebang(
        tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("#!/nonexistent/bin/python3\nprint('never')\n")
    script.chmod(0o755)
    for command in ("run", "monitor"):
        done = gpudiag(command, "--logdir", str(tmp_path / "runs"), "--", str(script))
        assert_usage_error(done, "its #! line names /nonexistent/bin/python3, which does not "
                           "exist", tmp_path / "runs")


PROFILED_TO_THE_END = """
import tensorflow as tf
w = tf.Variable(tf.ones([16, 16]))


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(1e-4 * tape.gradient(loss, w))
    return loss


x = tf.ones([4, 16])
for _ in range(40):
    step(x)
"""


@pytest.mark.slow
def test_a_profiler_window_open_at_the_end_is_reported_as_such(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", str(tmp_path), "--profile-warmup",
         "30", "--profile-steps", "20", "--", sys.executable, "-c", PROFILED_TO_THE_END],
        capture_output=True, text=True, timeout=300, env=ENV, cwd=REPO,
        stdin=subprocess.DEVNULL)
    assert done.returncode in (0, 1), done.stderr[-2000:]
    found = findings_by_id(load_report(run_dirs(tmp_path)[0]))
    profile, timing = found["run.profile"], found["run.throughput"]
    assert profile["evidence"]["profile"]["status"] == "stopped-at-exit"
    assert "None" not in profile["message"], profile["message"]
    assert "the program ended inside the window" in profile["message"] or \
        "gave no trace" in profile["message"], profile["message"]
    assert timing["status"] == "skip"
    assert timing["message"].startswith("tf.function"), timing["message"]
    assert "ran 40 steps, but every step after its 30 warm-up steps was in the profiled " \
           "window (steps 30-39)" in timing["message"], timing["message"]


@pytest.mark.slow
def test_under_parameter_server_fit_of_tf_keras_gpudiag_stands_aside(tmp_path: Path) -> None:
    pytest.importorskip("tf_keras", reason="tf_keras (Keras 2) is not installed here: "
                        "pip install tf_keras to run this case")
    # the program ends its fit and exits 0 under gpudiag as it does alone (no plain run
    # beside it: a program that failed alone fails here too)
    program = [sys.executable, str(REPO / "tests" / "programs" / "ps_fit_tf_keras.py")]
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", str(tmp_path), "--", *program],
        capture_output=True, text=True, timeout=300, env=ENV, cwd=REPO,
        stdin=subprocess.DEVNULL)
    assert "Batch-level" not in done.stderr
    assert "fit done" in done.stdout, done.stderr[-3000:]
    found = findings_by_id(load_report(run_dirs(tmp_path)[0]))
    assert found["run.command"]["evidence"]["returncode"] == 0
    seen = found["run.tensorflow"]
    assert any("tf_keras refuses callbacks with batch-level hooks, so gpudiag's fit recorder "
               "stood aside" in n for n in seen["evidence"]["hook_notes"]), seen
    assert "stood aside" in seen["message"]

"""Every child of gpudiag waits at its gate (gpudiag.procs.gate) until the watchdog knows
its group: a ``kill -9`` of gpudiag at any moment leaves nothing of its own running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, process_alive, until

#: A gpudiag that is killed (SIGKILL) just after starting its child, before it has told the
#: watchdog the child's group: the moment ``spawn`` used to leave open.
_DIES_IN_THE_WINDOW = """
import os, signal, sys
from gpudiag.procs import group
told = group._watchdog.tell
def tell(line):
    if line.startswith("+"):
        open(sys.argv[1], "w").write(line[1:])
        os.kill(os.getpid(), signal.SIGKILL)
    told(line)
group._watchdog.tell = tell
group.spawn(["sh", "-c", f"touch {sys.argv[2]}; sleep 300"])
"""
_SAYS_PID_AND_GROUP = ("import os, sys; "
                       "os.write(int(sys.argv[1]), b'%d %d' % (os.getpid(), os.getpgid(0)))")


def test_a_gpudiag_killed_before_telling_the_watchdog_never_runs_the_child(
        tmp_path: Path) -> None:
    pid_file, ran = tmp_path / "pid", tmp_path / "ran"
    spawner = subprocess.run(
        [sys.executable, "-c", _DIES_IN_THE_WINDOW, str(pid_file), str(ran)],
        env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, timeout=60)
    assert spawner.returncode == -signal.SIGKILL, spawner.stderr
    gate = int(pid_file.read_text())
    until(lambda: not process_alive(gate), "the gate to exit")
    assert not ran.exists()  # the command never started: nothing was left to end


def test_the_child_runs_in_the_gates_place_with_its_own_group_and_the_fds_passed(
        tmp_path: Path) -> None:
    from gpudiag.procs import group

    read_fd, write_fd = os.pipe()
    try:
        proc = group.spawn([sys.executable, "-c", _SAYS_PID_AND_GROUP, str(write_fd)],
                           pass_fds=(write_fd,))
    finally:
        os.close(write_fd)
    with os.fdopen(read_fd) as got:
        pid, pgid = map(int, got.read().split())
    assert group.wait(proc, timeout_s=30) == 0
    group.release(proc)
    assert pid == proc.pid == pgid  # exec'd in place: the pid gpudiag holds is the command's


def test_a_command_that_cannot_be_executed_raises_as_popen_would(tmp_path: Path) -> None:
    from gpudiag.procs import group

    with pytest.raises(FileNotFoundError) as missing:
        group.spawn(["no-such-command-here"])
    assert missing.value.filename == "no-such-command-here"
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    with pytest.raises(PermissionError):
        group.spawn([str(script)])  # not executable

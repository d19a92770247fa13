"""A child's exit status in words, from real child processes."""

from __future__ import annotations

import signal
import subprocess
import sys

from gpudiag.procs.exitstatus import describe_exit


def test_exit_code_signal_and_unfinished() -> None:
    code = subprocess.run([sys.executable, "-c", "raise SystemExit(7)"], check=False)
    assert describe_exit(code.returncode) == "exited with code 7"
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    assert describe_exit(proc.poll()) == "did not finish"
    proc.send_signal(signal.SIGTERM)
    assert describe_exit(proc.wait()) == "was killed by SIGTERM"
    assert describe_exit(-200) == "was killed by signal 200"

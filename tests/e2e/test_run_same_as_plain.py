"""The same programs plainly and under `gpudiag run`: the same exit code, the same bytes
on stdout and stderr (issue 20). gpudiag's own text is set apart first: on stdout its
banner before the program's first byte and its summary after the program's last; on
stderr its ``gpudiag: `` lines. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, split_own_lines

ENV = {**os.environ, "PYTHONPATH": str(REPO)}

CHILD_THEN_EXIT = """
import pathlib, subprocess, sys
flag = pathlib.Path(sys.argv[1]) / "child-spoke"
subprocess.Popen([sys.executable, "-c", '''
import pathlib, sys, time
print("the detached child speaks", flush=True)
pathlib.Path(sys.argv[1]).touch()
time.sleep(1)
''', str(flag)], start_new_session=True)
while not flag.exists():
    pass
print("the program exits before its child")
"""

PROGRAMS: dict[str, tuple[str, bytes]] = {  # name: (program, stdin)
    "heavy output": ("import sys\nfor i in range(60_000):\n    print(f'{i:08d}', 'z' * 80)\n"
                     "print('and on stderr', file=sys.stderr)\n", b""),
    "binary output": ("import sys\nsys.stdout.buffer.write(bytes(range(256)) * 4096)\n"
                      "sys.stderr.buffer.write(b'\\x00\\xff\\r\\x1b[2Kpartial')\n", b""),
    "stdin": ("import sys\nfor line in sys.stdin:\n    print(line.strip().upper())\n",
              b"hello\nworld\n"),
    "detached child": (CHILD_THEN_EXIT, b""),
    "changed directory": ("import os, sys\nos.chdir(sys.argv[1])\nopen('here', 'w').close()\n"
                          "print(sorted(os.listdir('.')))\n", b""),
    "exit 0": ("print('fine')", b""),
    "exit 3": ("import sys\nprint('three')\nsys.exit(3)", b""),
    "exception": ("def f():\n    raise RuntimeError('boom')\nf()", b""),
    "sys.exit(message)": ("import sys\nsys.exit('bad input, giving up')", b""),
    "os._exit": ("import os, sys\nprint('unflushed?', flush=True)\nos._exit(7)", b""),
    "SIGKILL self": ("import os, signal\nprint('going', flush=True)\n"
                     "os.kill(os.getpid(), signal.SIGKILL)", b""),
    "SIGTERM self": ("import os, signal\nprint('going', flush=True)\n"
                     "os.kill(os.getpid(), signal.SIGTERM)", b""),
}


def _shell_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _run(argv: list[str], stdin: bytes, where: Path) -> subprocess.CompletedProcess[bytes]:
    where.mkdir()
    return subprocess.run([*argv, str(where)], input=stdin, capture_output=True, timeout=120,
                          env=ENV, cwd=REPO)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_the_program_behaves_the_same_under_gpudiag_run(tmp_path: Path, name: str) -> None:
    program, stdin = PROGRAMS[name]
    plain = _run([sys.executable, "-c", program], stdin, tmp_path / "plain")
    under = _run([sys.executable, "-m", "gpudiag", "run", "--logdir", str(tmp_path / "runs"),
                  "--", sys.executable, "-c", program], stdin, tmp_path / "under")
    assert _shell_code(under.returncode) == _shell_code(plain.returncode), under.stderr[-2000:]
    assert under.stdout == plain.stdout  # stdout is the program's alone, byte for byte
    before, program_err, after = split_own_lines(under.stderr, "run")
    assert before.startswith(b"gpudiag run -> "), before
    assert re.search(rb"^report:\s", after, re.M) or b"interrupted by" in after, after[-500:]
    theirs = b"".join(ln for ln in program_err.splitlines(keepends=True)
                      if not ln.startswith(b"gpudiag: "))
    assert theirs == plain.stderr
    assert b"Traceback" not in under.stderr or b"Traceback" in plain.stderr

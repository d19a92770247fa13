"""Processes the hooks cannot enter, under `gpudiag run` (issue 26, case 10): a launcher
starting its TensorFlow child with ``python -I``, ``-E``, ``-S`` or a clean environment
(``env -i``), and a bash wrapper that execs ``python -I``. Each runs plainly and under
`gpudiag run`; exit code and stdout are compared, and the report names the process
(pid, command, why) and says what could not be observed, never "TensorFlow was never
imported" or "not a Python program". The test opens the child's gate once gpudiag's
process list (children/program/processes.jsonl) holds it. docs/reliability.md counts
these cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, load_report, run_dirs, split_own_lines, until

from gpudiag import layout

ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}

#: The TensorFlow child: waits for the gate, then computes (-S has no site-packages).
CHILD = """
import pathlib, sys, time
where = pathlib.Path(sys.argv[1])
try:
    import tensorflow as tf
    result = int(tf.reduce_sum(tf.constant([1, 2])))
except ImportError:
    result = 'no tensorflow'
while not (where / 'gate').exists():
    time.sleep(0.01)
print('child', result, flush=True)
"""
LAUNCHER = """
import subprocess, sys
prefix = sys.argv[2:]
code = subprocess.run([*prefix, '-c', CHILD, sys.argv[1]]).returncode
print('launcher saw', code, flush=True)
""".replace("CHILD", repr(CHILD))

CASES = {
    "python -I": (["python", "-c", LAUNCHER, "{where}", sys.executable, "-I"], "-I (isolated"),
    "python -E": (["python", "-c", LAUNCHER, "{where}", sys.executable, "-E"], "-E (PYTHON*"),
    "python -S": (["python", "-c", LAUNCHER, "{where}", sys.executable, "-S"], "-S (no site"),
    "env -i": (["python", "-c", LAUNCHER, "{where}", "env", "-i", sys.executable],
               "a clean environment"),
    "bash exec python -I": (["bash", "-c", 'exec "$0" -I -c "$1" "$2"', sys.executable, CHILD,
                             "{where}"], "-I (isolated"),
}


def _command(case: str, where: Path) -> list[str]:
    argv, _ = CASES[case]
    return [sys.executable if w == "python" else w.replace("{where}", str(where))
            for w in argv]


def _listed(logdir: Path) -> list[dict[str, object]]:
    rows = []
    for path in logdir.glob(f"*/{layout.CHILDREN_DIR}/{layout.RUN_CHILD_NAME}/"
                            f"{layout.RUN_PROCESSES}"):
        rows += [json.loads(ln) for ln in path.read_text().splitlines() if ln.endswith("}")]
    return rows


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_process_the_hooks_cannot_enter_is_named_with_why(tmp_path: Path, case: str) -> None:
    plain_dir, under_dir = tmp_path / "plain", tmp_path / "under"
    plain_dir.mkdir()
    under_dir.mkdir()
    (plain_dir / "gate").touch()
    plain = subprocess.run(_command(case, plain_dir), capture_output=True, env=ENV, cwd=REPO,
                           timeout=300, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0 and b"child " in plain.stdout, plain.stderr[-2000:]
    logdir = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                             str(logdir), "--", *_command(case, under_dir)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=REPO,
                            stdin=subprocess.DEVNULL)
    why = CASES[case][1]
    try:
        until(lambda: any(why in str(r["why"]) for r in _listed(logdir)),
              f"gpudiag lists the child ({why})", deadline_s=120)
    finally:
        (under_dir / "gate").touch()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == plain.returncode, err[-3000:]
    assert out == plain.stdout
    (child,) = [r for r in _listed(logdir) if why in str(r["why"])]
    (run_dir,) = run_dirs(logdir)
    found = {f["id"]: f for f in load_report(run_dir)["findings"]}["run.tensorflow"]
    assert f"pid {child['pid']}" in found["message"] and why in found["message"], found
    assert "was not observed" in found["message"]
    assert "never imported" not in found["message"]
    assert "not a Python program" not in found["message"]
    if case == "python -E":
        assert "-S" not in found["message"] and "-I" not in found["message"]


#: A child any Python runs (2.7 and 3.x alike), waiting for the gate.
OLD_CHILD = """
import os, sys, time
where = sys.argv[1]
while not os.path.exists(os.path.join(where, 'gate')):
    time.sleep(0.01)
sys.stdout.write('old child %d.%d\\n' % sys.version_info[:2])
sys.stdout.flush()
"""
OLD_LAUNCHER = """
import subprocess, sys
code = subprocess.run([sys.argv[2], '-c', OLD_CHILD, sys.argv[1]]).returncode
print('launcher saw', code, flush=True)
""".replace("OLD_CHILD", repr(OLD_CHILD))


def _older_interpreter(version: str) -> str | None:
    """An interpreter of ``version`` on this machine (pyenv's or on PATH), if any."""
    import shutil

    for root in (Path.home() / ".pyenv" / "versions").glob(f"{version}.*"):
        exe = root / "bin" / f"python{version}"
        if exe.exists():
            return str(exe)
    return shutil.which(f"python{version}")


@pytest.mark.slow
@pytest.mark.parametrize("version", ["2.7", "3.7"])
def test_an_older_interpreter_the_program_starts_runs_as_plainly_and_is_named(
        tmp_path: Path, version: str) -> None:
    """A program starting another, older Python (a tool of another environment): the
    hooks' sitecustomize stands aside in it without a word (Python 2 printed "'import
    sitecustomize' failed" on the program's stderr; 3.7, gpudiag's marker lines), the
    interpreter's own sitecustomize still runs, and the report names the process with
    its version."""
    exe = _older_interpreter(version)
    if exe is None:
        pytest.skip(f"no Python {version} on this machine")
    argv = [sys.executable, "-c", OLD_LAUNCHER]
    plain_dir, under_dir = tmp_path / "plain", tmp_path / "under"
    plain_dir.mkdir()
    under_dir.mkdir()
    (plain_dir / "gate").touch()
    plain = subprocess.run([*argv, str(plain_dir), exe], capture_output=True, env=ENV,
                           cwd=REPO, timeout=300, stdin=subprocess.DEVNULL)
    assert plain.returncode == 0 and f"old child {version}".encode() in plain.stdout, plain
    logdir = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "gpudiag", "run", "--logdir",
                             str(logdir), "--", *argv, str(under_dir), exe],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV, cwd=REPO,
                            stdin=subprocess.DEVNULL)
    try:
        until(lambda: any("older than gpudiag's hooks need" in str(r["why"])
                          for r in _listed(logdir)), "gpudiag lists the older child", 120)
    finally:
        (under_dir / "gate").touch()
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-3000:]
    assert out == plain.stdout
    # nothing the older Python printed is added to what the program wrote
    assert split_own_lines(err, "run")[1] == plain.stderr, err[-3000:]
    (child,) = [r for r in _listed(logdir) if "older than" in str(r["why"])]
    assert f"is Python {version}" in str(child["why"])
    (run_dir,) = run_dirs(logdir)
    found = {f["id"]: f for f in load_report(run_dir)["findings"]}["run.tensorflow"]
    assert f"pid {child['pid']}" in found["message"] and "was not observed" in found["message"]

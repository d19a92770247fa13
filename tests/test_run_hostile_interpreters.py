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
from conftest import REPO, load_report, run_dirs, until

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

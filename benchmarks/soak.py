"""A long job under `gpudiag run`: its overhead, the run directory's size and how long
gpudiag takes to return after the program ends.

    python benchmarks/soak.py [--minutes 10] [--plain-minutes 1]

Runs benchmarks/_soak_workload.py (a fast custom loop with a few eager ops per step)
plainly for ``--plain-minutes``, then under `gpudiag run` for ``--minutes``, then plainly
again: the step-time ratio is the hooked run's median step time over the mean of the two
plain runs', printed beside the two plain runs' own ratio (the machine's spread in this
run). The run directory's size is given without the program's own stdout.txt and
stderr.txt (saved whole: they are the user's). The finish time is from the program's exit
(report.json's ``run.finish.program_exited_unix_s``, taken when gpudiag's wait for it
returned) to `gpudiag run` returning, with its parts (the program's output drained, the
live thread stopped, the analysis; the rest is the report's writing); beside it, how long
the program itself took to exit after its last line (its ``END_UNIX``, printed just
before it ends: TensorFlow's teardown, the same with or without gpudiag), under gpudiag
and in the plain runs. The ratio is printed last.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKLOAD = HERE / "_soak_workload.py"
SAVED_WHOLE = ("stdout.txt", "stderr.txt")


def value(output: str, key: str) -> float:
    lines = [ln for ln in output.splitlines() if ln.startswith(f"{key} ")]
    if not lines:
        raise RuntimeError(f"the workload printed no {key} line:\n{output[-2000:]}")
    return float(lines[-1].split()[1])


def run(seconds: float, logdir: str | None) -> tuple[str, float]:
    program = [sys.executable, str(WORKLOAD), str(seconds)]
    cmd = program if logdir is None else [sys.executable, "-m", "gpudiag", "run",
                                          "--logdir", logdir, "--", *program]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 900,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    returned = time.time()
    if proc.returncode not in (0, 1):  # 1: a finding failed (no GPU here ...)
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return proc.stdout, returned


def size(run_dir: Path) -> tuple[int, int]:
    """Bytes of the run directory besides the program's own output, and of that output."""
    other = own = 0
    for p in run_dir.rglob("*"):
        if p.is_file():
            if p.name in SAVED_WHOLE:
                own += p.stat().st_size
            else:
                other += p.stat().st_size
    return other, own


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--plain-minutes", type=float, default=1.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpudiag-soak-") as logdir:
        plain1, plain1_returned = run(args.plain_minutes * 60, None)
        hooked, returned = run(args.minutes * 60, logdir)
        plain2, plain2_returned = run(args.plain_minutes * 60, None)
        (run_dir,) = [p for p in Path(logdir).iterdir() if p.name.endswith("-run")]
        other, own = size(run_dir)
        finish = json.loads((run_dir / "report.json").read_text())["data"]["run"]["finish"]
    p1, p2, h = value(plain1, "STEP_S"), value(plain2, "STEP_S"), value(hooked, "STEP_S")
    exited = finish.pop("program_exited_unix_s")
    # a program's own exit after its last line: TensorFlow's teardown, not gpudiag's
    plain_exit = [plain1_returned - value(plain1, "END_UNIX"),
                  plain2_returned - value(plain2, "END_UNIX")]
    print(f"plain: {p1 * 1e3:.3f} and {p2 * 1e3:.3f} ms/step ({args.plain_minutes:g} min "
          f"each); under gpudiag run: {h * 1e3:.3f} ms/step over {int(value(hooked, 'STEPS'))}"
          f" steps ({args.minutes:g} min)")
    print(f"run directory: {other / 1e6:.2f} MB besides the program's own output "
          f"({own / 1e6:.2f} MB, saved whole)")
    parts = ", ".join(f"{k.removesuffix('_s').replace('_', ' ')} at {v:.2f} s"
                      for k, v in finish.items())
    print(f"gpudiag returned {returned - exited:.2f} s after the program exited ({parts}); "
          f"the program itself exited {exited - value(hooked, 'END_UNIX'):.2f} s after its "
          f"last line (plain runs: {plain_exit[0]:.2f} and {plain_exit[1]:.2f} s)")
    print(f"step-time ratio {h / ((p1 + p2) / 2):.3f} (plain against plain in this run: "
          f"{p2 / p1:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

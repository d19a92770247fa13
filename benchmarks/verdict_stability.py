"""Does the same program get the same verdict every time? (issue 37, item 2)

Three programs, each run ``--runs`` times under the real ``gpudiag run``, first on the
machine as it is ("idle": nothing of this script's own beside it) and then with one busy
process per core (a Python loop that never sleeps, started before the runs and stopped
after them):

- tests/programs/keras_random_labels.py: a Keras fit on random labels, no seed (a
  model that cannot learn: its first losses differ from run to run);
- tests/programs/input_pipeline_fit.py: a Keras fit fed by a serial tf.data map (input-bound);
- tests/programs/keras_fit_tiny.py: a small healthy fit.

For every run it reads report.json and keeps each finding's status and the cause it names
(run.learning: each loop's cause; a finding with ranked causes: the first, the one the
short verdict names). A program is stable when every run, in both conditions, gives the same
set of findings with the same statuses and causes. It prints each program's verdict and,
where runs differ, the findings that differed and how; the load average each run saw; and
last the count of stable programs.

    PYTHONPATH=. python benchmarks/verdict_stability.py [--runs 5] [--conditions idle,busy]
        [--programs keras_random_labels,input_pipeline_fit,keras_fit_tiny]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
PROGRAMS = REPO / "tests" / "programs"
DEFAULT_PROGRAMS = "keras_random_labels,input_pipeline_fit,keras_fit_tiny"


def _spin() -> None:  # a busy process: one core's worth of work, never sleeping
    n = 0
    while True:
        n = (n * 1103515245 + 12345) & 0xFFFFFFFF


def verdict(report: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """Each finding's status and the cause it names."""
    out: dict[str, tuple[str, Any]] = {}
    for f in report["findings"]:
        ev = f.get("evidence") or {}
        cause: Any = None
        if f["id"] == "run.learning":
            cause = tuple(loop.get("cause") for loop in ev.get("loops", []))
        elif ev.get("causes"):
            cause = ev["causes"][0]
        out[f["id"]] = (f["status"], cause)
    return out


def run_once(program: str, logdir: Path) -> tuple[dict[str, tuple[str, Any]], float, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    load = os.getloadavg()[0]
    proc = subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir), "--",
         sys.executable, str(PROGRAMS / f"{program}.py")],
        capture_output=True, text=True, env=env, timeout=900)
    (run_dir,) = [p.parent for p in logdir.glob("*/report.json")]
    from gpudiag.rundir import load_run

    report = load_run(run_dir).report_json
    return verdict(report), max(load, os.getloadavg()[0]), proc.returncode


def differences(verdicts: list[dict[str, tuple[str, Any]]]) -> dict[str, Counter[str]]:
    ids = sorted({fid for v in verdicts for fid in v})
    out: dict[str, Counter[str]] = {}
    for fid in ids:
        seen = Counter(json.dumps(v.get(fid, ("absent", None))) for v in verdicts)
        if len(seen) > 1:
            out[fid] = seen
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--conditions", default="idle,busy")
    parser.add_argument("--programs", default=DEFAULT_PROGRAMS)
    args = parser.parse_args()
    programs = [p.strip() for p in args.programs.split(",") if p.strip()]
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    results: dict[str, list[tuple[str, dict[str, tuple[str, Any]], float, int]]] = {
        p: [] for p in programs}
    with tempfile.TemporaryDirectory(prefix="gpudiag-stability-") as tmp:
        for condition in conditions:
            spinners = []
            if condition == "busy":
                spinners = [multiprocessing.Process(target=_spin, daemon=True)
                            for _ in range(os.cpu_count() or 1)]
                for s in spinners:
                    s.start()
            try:
                for n in range(args.runs):
                    for program in programs:  # interleaved: a drift in the machine hits all
                        logdir = Path(tmp) / condition / program / str(n)
                        t0 = time.monotonic()
                        v, load, rc = run_once(program, logdir)
                        results[program].append((condition, v, load, rc))
                        named = {k: s for k, s in v.items()
                                 if k in ("run.bottleneck", "run.learning")}
                        print(f"{condition} {program} run {n + 1}: exit {rc}, load {load:.1f}, "
                              f"{time.monotonic() - t0:.0f} s, {named}", flush=True)
            finally:
                for s in spinners:
                    s.terminate()
                    s.join()
    stable = 0
    for program in programs:
        rows = results[program]
        diff = differences([v for _, v, _, _ in rows])
        codes = Counter(rc for *_, rc in rows)
        loads = [load for _, _, load, _ in rows]
        print(f"\n{program}: {len(rows)} runs ({', '.join(conditions)}), load "
              f"{min(loads):.1f}-{max(loads):.1f}, exit codes {dict(codes)}")
        for fid, (status, cause) in sorted(rows[0][1].items()):
            print(f"  {fid}: {status}" + (f" ({cause})" if cause else ""))
        if diff or len(codes) > 1:
            for fid, seen in diff.items():
                print(f"  DIFFERS {fid}: " + "; ".join(f"{k} x{c}" for k, c in seen.items()))
        else:
            stable += 1
            print("  the same statuses and named causes in every run")
    print(f"\nstable programs: {stable} of {len(programs)} "
          f"({args.runs} runs each in {', '.join(conditions)})")
    return 0 if stable == len(programs) else 1


if __name__ == "__main__":
    sys.exit(main())

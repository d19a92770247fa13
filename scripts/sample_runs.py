"""Regenerate sample_runs/: each gpudiag command run for real, one logdir per command.

    python scripts/sample_runs.py [--out sample_runs]

Runs ``gpudiag env``, ``placement``, ``memory``, ``scaling --max-gpus 4`` (towers and
mirrored on 1, 2, 4 devices, small settings so the checkout stays a few MB) and
``monitor -- python -c <TensorFlow matmuls>`` and ``run -- python -m
gpudiag.examples.keras_mnist_like`` from inside the output directory with
``--logdir <command>``, so every path a report holds is relative to sample_runs/
(``scaling/2026-...-scaling/towers-4dev``). Then the absolute paths that still name
this checkout or this interpreter (the argv gpudiag was started with, the workload's
command line, log lines) are rewritten in the text files (``<repo>/``, ``python``).
Earlier sample runs of those commands are removed first; the profile plugin's caches
are ignored by .gitignore. Exit status: the worst of the commands' when one could not
run (2 or more), else 0 (failed checks are results).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
WORKLOAD = (
    "import tensorflow as tf\n"
    "x = tf.random.normal([1024, 1024])\n"
    "for _ in range(60):\n"
    "    x = tf.linalg.matmul(x, x) / 32.0\n"
    "print('sample workload done:', x.shape)\n"
)
# The gpudiag arguments per command (its logdir is sample_runs/<command>).
COMMANDS: dict[str, list[str]] = {
    "env": [],
    "placement": [],
    "memory": [],
    "scaling": ["--max-gpus", "4", "--steps", "60", "--warmup-steps", "5",
                "--profile-steps", "3", "--histogram-every", "20", "--allreduce-max-mb", "64"],
    "monitor": ["--", "python", "-c", WORKLOAD],  # this interpreter, first on PATH
    # a user-like Keras program, unmodified, under `gpudiag run`
    "run": ["--", "python", "-m", "gpudiag.examples.keras_mnist_like"],
}
TEXT_FILES = ("report.json", "report.md", "config.json", "result.json", "stdout.txt",
              "stderr.txt")


def relativize(out: Path) -> int:
    """Rewrite this checkout's and this interpreter's absolute paths in the text files."""
    replacements = [(str(out.resolve()) + "/", ""), (sys.executable, "python"),
                    (str(REPO) + "/", "<repo>/")]
    changed = 0
    for path in out.rglob("*"):
        if path.name not in TEXT_FILES or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        new = text
        for old, repl in replacements:
            new = new.replace(old, repl)
        if new != text:
            path.write_text(new, encoding="utf-8", errors="surrogateescape")
            changed += 1
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO / "sample_runs")
    parser.add_argument("--only", nargs="*", choices=list(COMMANDS), default=list(COMMANDS))
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ["PATH"]))}
    worst = 0
    for command in args.only:
        shutil.rmtree(out / command, ignore_errors=True)
        argv = [sys.executable, "-m", "gpudiag", command, "--logdir", command,
                *COMMANDS[command]]
        shown = " ".join(COMMANDS[command]).replace(WORKLOAD, "<TensorFlow matmuls>")
        print(f"$ gpudiag {command} --logdir {out / command} {shown}", flush=True)
        code = subprocess.call(argv, cwd=out, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
        print(f"  exit {code}", flush=True)
        if code >= 2:
            worst = max(worst, code)
    print(f"relative paths: {relativize(out)} files rewritten")
    return worst


if __name__ == "__main__":
    sys.exit(main())

"""How fast a program's output flows under `gpudiag run`, against the same program plainly.

The program writes ``--mb`` MB to stdout in 100-byte lines (print-sized writes through
Python's buffered stdout) and times itself from its first write to its last flush, so
start-up is not counted; what it measures is how long its writes were held up. Its stdout
(gpudiag's, under `run`) is a pipe that this process drains at once, as a terminal, `tee`
or a CI log collector would. Each round runs plain, under `gpudiag run`, and plain again,
so the two plain runs give the spread one plain run has against another on this machine.
The last line is the median over rounds of (plain time / time under run): the program's
output throughput under run as a share of plain (1.0: no cost; the target is >= 0.9).

    python benchmarks/output_throughput.py [--mb 50] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
GPUDIAG = [sys.executable, "-m", "gpudiag"]

PROGRAM = """
import sys, time
mb, out = int(sys.argv[1]), sys.argv[2]
line = b"x" * 99 + b"\\n"
write = sys.stdout.buffer.write
start = time.perf_counter()
for _ in range(mb * 10_000):
    write(line)
sys.stdout.flush()
elapsed = time.perf_counter() - start
with open(out, "w") as f:
    f.write(repr(elapsed))
"""


def drain(stream: object) -> None:
    read = stream.read  # type: ignore[attr-defined]
    while read(1 << 20):
        pass


def timed(argv: list[str], seconds_file: Path) -> float:
    """Run ``argv`` with stdout a pipe drained at once; the program's own time."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    reader = threading.Thread(target=drain, args=(proc.stdout,))
    reader.start()
    code = proc.wait()
    reader.join()
    if code != 0:
        raise SystemExit(f"{argv[:4]}... exited {code}")
    return float(seconds_file.read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpudiag-throughput-") as tmp:
        program = Path(tmp) / "writer.py"
        program.write_text(PROGRAM)
        seconds = Path(tmp) / "seconds"
        plain_argv = [sys.executable, str(program), str(args.mb), str(seconds)]
        run_argv = [*GPUDIAG, "run", "--logdir", str(Path(tmp) / "runs"), "--", *plain_argv]
        timed(plain_argv, seconds)  # warm the page cache and the interpreter
        plain_a: list[float] = []
        under: list[float] = []
        plain_b: list[float] = []
        print(f"{args.mb} MB to stdout (a pipe drained at once), {args.rounds} rounds of "
              "plain / run / plain")
        for k in range(args.rounds):
            plain_a.append(timed(plain_argv, seconds))
            under.append(timed(run_argv, seconds))
            plain_b.append(timed(plain_argv, seconds))
            print(f"  round {k + 1}: plain {plain_a[-1]:.3f} s, run {under[-1]:.3f} s, "
                  f"plain {plain_b[-1]:.3f} s")
    plains = plain_a + plain_b
    spread = [a / b for a, b in zip(plain_a, plain_b, strict=True)]
    print(f"plain: median {statistics.median(plains):.3f} s "
          f"({args.mb / statistics.median(plains):.0f} MB/s); under run: median "
          f"{statistics.median(under):.3f} s ({args.mb / statistics.median(under):.0f} MB/s)")
    print(f"plain-vs-plain spread (first / second plain run of a round): "
          f"min {min(spread):.3f}, median {statistics.median(spread):.3f}, "
          f"max {max(spread):.3f}")
    ratios = [statistics.fmean((a, b)) / r for a, b, r in zip(plain_a, plain_b, under,
                                                               strict=True)]
    print(f"output throughput under run / plain (median of {len(ratios)} rounds; "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}): {statistics.median(ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What the NVML sampler costs the workload it watches, measured side by side in one run.

The workload is what `gpudiag monitor` watches: a child process doing a fixed amount of
CPU-bound work and timing itself (so process start-up is not counted). Runs alternate
without and with the sampler (gpudiag.nvml.Sampler, in this parent process, as in
`monitor`), in ``--repeats`` adjacent pairs whose order flips each time. The last line
is the median over pairs of (workload time with sampling / without): 1.00 means no
measurable cost. On a shared machine other processes add noise of several percent either
way; the sampler's own CPU time (printed too) bounds what it can take from the workload.

Backend: the real NVML when it initialises; otherwise the scripted fake backend of the
tests (tests/fake_nvml.py), which measures the sampler's own Python cost (threads,
polling, summaries) but not the driver's time per NVML call. The output says which.

    python benchmarks/sampler_cost.py [--interval 0.1] [--repeats 7] [--iterations 6000000]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from gpudiag import nvml  # noqa: E402

WORKLOAD = """
import sys, time
n = int(sys.argv[1])
start = time.perf_counter()
acc = 0
for i in range(n):
    acc += i * i % 7
print(time.perf_counter() - start)
"""


def run_workload(iterations: int) -> float:
    out = subprocess.run([sys.executable, "-c", WORKLOAD, str(iterations)], check=True,
                         capture_output=True, text=True).stdout
    return float(out.strip())


def open_backend(fake_gpus: int) -> nvml.NvmlBackend:
    """The real NVML when it initialises, else the tests' fake backend with ``fake_gpus``."""
    backend = nvml.open_backend()
    if not isinstance(backend, nvml.NvmlUnavailable):
        return backend
    import fake_nvml

    return fake_nvml.FakeBackend([fake_nvml.FakeDevice() for _ in range(fake_gpus)],
                                 scenario=f"busy; {backend.reason}")


def describe(backend: nvml.NvmlBackend) -> str:
    if isinstance(backend, nvml.PynvmlBackend):
        return f"real NVML: {backend.description}"
    return (f"{backend.description}: this measures the sampler's own Python cost, not the "
            "driver's time per NVML call")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=nvml.MIN_INTERVAL_S,
                        help="sampler interval, s (default: the minimum, 0.1, the worst case)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--iterations", type=int, default=6_000_000,
                        help="loop iterations of the workload (about 1 s per run here)")
    parser.add_argument("--fake-gpus", type=int, default=4,
                        help="GPUs of the fake backend when NVML is absent")
    args = parser.parse_args()
    if args.interval < nvml.MIN_INTERVAL_S or args.repeats < 1 or args.iterations < 1:
        parser.error("--interval must be >= 0.1, --repeats and --iterations >= 1")

    with nvml.opened(lambda: open_backend(args.fake_gpus)) as backend:
        assert not isinstance(backend, nvml.NvmlUnavailable)
        print(f"backend: {describe(backend)} ({backend.device_count()} GPU(s))")
    print(f"interval {args.interval:g} s, {args.repeats} runs each way, alternating, "
          f"{args.iterations} iterations per run")
    run_workload(args.iterations // 10)  # warm the page cache and the interpreter
    without: list[float] = []
    with_sampling: list[float] = []
    costs: list[nvml.SamplerCost] = []
    for k in range(args.repeats):
        # Pairs, each adjacent in time; the order flips every pair to cancel drift.
        for sampled in ((False, True) if k % 2 == 0 else (True, False)):
            if not sampled:
                without.append(run_workload(args.iterations))
                continue
            with nvml.opened(lambda: open_backend(args.fake_gpus)) as backend:
                assert not isinstance(backend, nvml.NvmlUnavailable)
                with nvml.Sampler(backend, args.interval) as sampler:
                    with_sampling.append(run_workload(args.iterations))
            assert sampler.result is not None
            result = sampler.result
            costs.append(result.cost)
        print(f"  pair {k + 1}: without {without[-1]:.3f} s, with {with_sampling[-1]:.3f} s "
              f"({result.cost.polls} polls of {len(result.summaries)} GPU(s))")
    cpu = sum(c.cpu_s for c in costs)
    duration = sum(c.duration_s for c in costs)
    polls = sum(c.polls for c in costs)
    mean_poll = statistics.fmean(c.poll_wall_mean_s for c in costs)
    print(f"without sampling: median {statistics.median(without):.3f} s, "
          f"min {min(without):.3f}, max {max(without):.3f}")
    print(f"with sampling:    median {statistics.median(with_sampling):.3f} s, "
          f"min {min(with_sampling):.3f}, max {max(with_sampling):.3f}")
    print(f"sampler: {cpu:.3f} CPU s over {duration:.1f} s sampled ({cpu / duration:.2%} of one "
          f"core), {polls} polls, {mean_poll * 1e3:.3f} ms per poll")
    print(f"ratio of the fastest runs (min with / min without): "
          f"{min(with_sampling) / min(without):.3f}")
    pair_ratios = [w / wo for w, wo in zip(with_sampling, without, strict=True)]
    print(f"ratio (workload time with sampling / without, median of {len(pair_ratios)} "
          f"adjacent pairs): {statistics.median(pair_ratios):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

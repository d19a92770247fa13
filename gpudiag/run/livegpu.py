"""NVML while the program runs (parent side, no TensorFlow): the polls the run's
nvml.Sampler has taken, read by count as they come (gpudiag.run.live calls ``poll`` every
POLL_S), written as the ``nvml/`` TensorBoard run with the tags the finished run uses
(gpudiag.nvml.write_samples), and fed to the idle watch
(gpudiag.verdicts.run.gpu_idle: a GPU at 0 % for IDLE_WINDOW_S while another works).
The last utilization of each GPU is kept for the terminal's status line.

The file is the finished run's too when it holds every sample the sampler returned
(``NvmlFile.holds``; the live thread's last poll comes after the sampler stopped): an
hour on eight GPUs is hundreds of thousands of scalars, not written again after the
program's end (gpudiag.run.analyse).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path

from gpudiag import nvml
from gpudiag.layout import NVML_TB_RUN
from gpudiag.tb.writer import EventWriter
from gpudiag.verdicts.run.gpu_idle import IDLE_WINDOW_S, IdleGpu, IdleWatch, polls_of


@dataclass
class NvmlFile:
    """The ``nvml/`` event file as the live thread wrote it."""

    path: Path | None = None
    counts: tuple[int, int, int] = (0, 0, 0)  # polls, driver samples, GPM readings written
    tags: set[str] = field(default_factory=set)
    texts: list[tuple[int, str]] = field(default_factory=list)  # (step, line) told into it
    complete: bool = True  # False: a write failed part-way

    def holds(self, result: nvml.SamplingResult) -> bool:
        """Whether it has every sample of the finished sampling (and nothing else)."""
        return self.complete and self.path is not None and self.counts == (
            len(result.samples), len(result.util_samples), len(result.gpm_samples))


class LiveGpus:
    def __init__(self, sampler: nvml.Sampler, run_dir: Path, *,
                 window_s: float = IDLE_WINDOW_S) -> None:
        self.sampler = sampler
        self.tb_dir = run_dir / NVML_TB_RUN
        self.watch = IdleWatch(sampler.active_threshold_percent, window_s)
        self.util_percent: dict[int, float] = {}  # the last poll's, per GPU
        self.writer: EventWriter | None = None
        self.file = NvmlFile()

    def poll(self) -> tuple[bool, list[IdleGpu]]:
        """Read the new samples: whether any was written, and GPUs just found idle."""
        polls, driver, gpm = self.file.counts
        samples, utils, readings = self.sampler.samples_since(polls, driver, gpm)
        if not samples and not utils and not readings:
            return False, []
        if self.writer is None:
            self.writer = EventWriter(self.tb_dir)
            self.file.path = self.writer.path
        try:
            self.file.tags |= nvml.write_samples(self.writer, samples, utils, readings)
        except Exception:
            self.file.complete = False
            raise
        self.file.counts = (polls + len(samples), driver + len(utils), gpm + len(readings))
        polls_now = polls_of(samples)
        # replaced, not updated: the status line's thread reads it
        self.util_percent = {**self.util_percent,
                             **{p.index: p.util_percent for p in polls_now}}
        return True, self.watch.feed(polls_now)

    def text(self, tag: str, line: str, step: int) -> None:
        """A line told into this run's Text tab (kept for a rewrite at the end)."""
        if self.writer is None:
            self.writer = EventWriter(self.tb_dir)
            self.file.path = self.writer.path
        self.writer.text(tag, line, step=step)
        self.file.texts.append((step, line))

    def close(self) -> NvmlFile:
        """Close the live file; the finished run keeps it when it holds every sample."""
        if self.writer is not None:
            with contextlib.suppress(OSError):
                self.writer.close()
        return self.file

"""NVML while the program runs (parent side, no TensorFlow): the polls the run's
nvml.Sampler has taken, read by count as they come (gpudiag.run.live calls ``poll`` every
POLL_S), written as the ``nvml/`` TensorBoard run with the tags the finished run uses
(gpudiag.nvml.write_samples), and fed to the idle watch
(gpudiag.verdicts.run_gpu_idle: a GPU at 0 % for IDLE_WINDOW_S while another works).
The last utilization of each GPU is kept for the terminal's status line.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from gpudiag import nvml
from gpudiag.layout import NVML_TB_RUN
from gpudiag.tb.writer import EventWriter
from gpudiag.verdicts.run_gpu_idle import IDLE_WINDOW_S, IdleGpu, IdleWatch, polls_of


class LiveGpus:
    def __init__(self, sampler: nvml.Sampler, run_dir: Path, *,
                 window_s: float = IDLE_WINDOW_S) -> None:
        self.sampler = sampler
        self.tb_dir = run_dir / NVML_TB_RUN
        self.watch = IdleWatch(sampler.active_threshold_percent, window_s)
        self.util_percent: dict[int, float] = {}  # the last poll's, per GPU
        self.writer: EventWriter | None = None
        self._polls = 0
        self._driver = 0

    def poll(self) -> tuple[bool, list[IdleGpu]]:
        """Read the new samples: whether any was written, and GPUs just found idle."""
        samples, utils = self.sampler.samples_since(self._polls, self._driver)
        self._polls += len(samples)
        self._driver += len(utils)
        if not samples and not utils:
            return False, []
        if self.writer is None:
            self.writer = EventWriter(self.tb_dir)
        nvml.write_samples(self.writer, samples, utils)
        polls = polls_of(samples)
        # replaced, not updated: the status line's thread reads it
        self.util_percent = {**self.util_percent, **{p.index: p.util_percent for p in polls}}
        return True, self.watch.feed(polls)

    def close(self) -> None:
        """Remove the live file: the finished run writes every sample (run.analyse)."""
        if self.writer is not None:
            with contextlib.suppress(OSError):
                self.writer.close()
                self.writer.path.unlink()
